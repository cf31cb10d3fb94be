// The CLI core's side of tools/lkjit/op_cli.h: the subcommands, shared family options, the check of
// options against the chosen op, and presets looked up across families.
#include "tools/lkjit/op_cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "support/message.h"
#include "support/parse_int.h"
#include "tools/lkjit/common.h"

namespace cl = llvm::cl;

namespace lkjit::tool {

const char* cmd_name(Cmd c) {
  switch (c) {
    case Cmd::kRun: return "run";
    case Cmd::kCompile: return "compile";
    case Cmd::kTune: return "tune";
    case Cmd::kPrewarm: return "prewarm";
  }
  return "?";
}

cl::SubCommand& subcommand(Cmd c) {
  static cl::SubCommand run("run", "Run op layers on the GPU: compile, run, check against the float64 reference, "
                                   "time (default: every op's demo layers; no GPU: compile them)");
  static cl::SubCommand compile("compile", "Generate and compile one kernel for the given archs (no GPU needed)");
  static cl::SubCommand tune("tune", "Explore tile configurations of a layer's kernels on the GPU (--list: no GPU)");
  static cl::SubCommand prewarm("prewarm", "Compile kernels for target archs into the cache (no GPU needed)");
  switch (c) {
    case Cmd::kRun: return run;
    case Cmd::kCompile: return compile;
    case Cmd::kTune: return tune;
    case Cmd::kPrewarm: return prewarm;
  }
  return run;
}

// ---- registry -------------------------------------------------------------------------------------
OpCli& default_op() { return *op_clis().front(); }

std::string op_names(const char* sep) {
  std::string s;
  for (const OpCli* f : op_clis()) s += (s.empty() ? "" : sep) + std::string(f->name());
  return s;
}

OpCli& op_cli(const std::string& name, const std::string& what) {
  for (OpCli* f : op_clis())
    if (name == f->name()) return *f;
  throw SpecError(fmt::format("lkjit: error: {} '{}' is unknown; supported: {}", what, name, op_names()));
}

OpCli& chosen_op(const std::string& op) { return op.empty() ? default_op() : op_cli(op, "--op"); }

// ---- help ---------------------------------------------------------------------------------------
namespace {

struct LateHelp {
  llvm::cl::Option* option;
  std::string (*make)();
  std::string text;  // what the option's description points to
};
std::vector<std::unique_ptr<LateHelp>>& late_help() {
  static std::vector<std::unique_ptr<LateHelp>> all;
  return all;
}

}  // namespace

void HelpFrom::apply(cl::Option& o) const { late_help().push_back(std::make_unique<LateHelp>(LateHelp{&o, make, ""})); }

void describe_options() {
  for (auto& h : late_help()) {
    h->text = h->make();
    h->option->setDescription(h->text);
  }
}

// ---- shared options -------------------------------------------------------------------------------
namespace {

// The vocabulary: what each shared option means, whichever family reads it.
struct SharedDef {
  const char* name;
  bool flag;
  const char* value_desc;
  const char* one;   // run, compile, tune
  const char* many;  // prewarm (lists crossed with --shapes)
};
constexpr SharedDef kShared[] = {
    {"k", false, "k", "kernel size", "kernel sizes for --shapes, comma-separated"},
    {"stride", false, "n", "output stride", "output strides for --shapes, comma-separated"},
    {"no-bias", true, "", "layers without bias", "layers without bias"},
    {"nhwc", true, "", "NHWC (channels_last) activations, default NCHW", "NHWC (channels_last) activations"},
};

struct Shared {
  const SharedDef* def = nullptr;
  std::string name, base, help;
  std::vector<std::string> notes;
  std::unique_ptr<cl::opt<std::string>> value;
  std::unique_ptr<cl::opt<bool>> flag;
  cl::Option& option() { return value ? static_cast<cl::Option&>(*value) : *flag; }
};

Shared& shared(Cmd c, const std::string& name, bool flag, const char* family, cl::OptionCategory& cat,
               const std::string& note) {
  static std::map<std::pair<int, std::string>, std::unique_ptr<Shared>> all;
  auto& slot = all[{static_cast<int>(c), name}];
  if (!slot) {
    const SharedDef* def = nullptr;
    for (const auto& d : kShared)
      if (name == d.name) def = &d;
    // A family asking for an option the vocabulary lacks, or with the other kind, is a bug in that family.
    if (!def || def->flag != flag)
      throw std::logic_error(fmt::format("{}: no shared {} option '{}'", family, flag ? "flag" : "value", name));
    slot = std::make_unique<Shared>();
    slot->def = def;
    slot->name = name;
    slot->base = c == Cmd::kPrewarm ? def->many : def->one;
    slot->help = slot->base;
    if (flag)
      slot->flag = std::make_unique<cl::opt<bool>>(llvm::StringRef(slot->name), cl::desc(slot->help), cl::sub(subcommand(c)), cl::cat(cat));
    else
      slot->value = std::make_unique<cl::opt<std::string>>(llvm::StringRef(slot->name), cl::desc(slot->help), cl::value_desc(def->value_desc),
                                                           cl::init(""), cl::sub(subcommand(c)), cl::cat(cat));
  }
  Shared& s = *slot;
  s.option().addCategory(cat);
  s.notes.push_back(note.empty() ? family : fmt::format("{}: {}", family, note));
  s.help = s.base + " (";
  for (size_t i = 0; i < s.notes.size(); ++i) s.help += (i ? "; " : "") + s.notes[i];
  s.help += ")";
  s.option().setDescription(s.help);
  return s;
}

}  // namespace

const cl::opt<std::string>& shared_value(Cmd c, const std::string& name, const char* family, cl::OptionCategory& cat,
                                         const std::string& note) {
  return *shared(c, name, false, family, cat, note).value;
}

const cl::opt<bool>& shared_flag(Cmd c, const std::string& name, const char* family, cl::OptionCategory& cat,
                                 const std::string& note) {
  return *shared(c, name, true, family, cat, note).flag;
}

std::string option_label(const cl::Option& o) { return (o.ArgStr.size() == 1 ? "-" : "--") + o.ArgStr.str(); }

int option_int(const cl::opt<std::string>& o, int64_t lo, int64_t hi, bool odd, int fallback) {
  if (!o.getNumOccurrences()) return fallback;
  const std::string& arg = o.getValue();
  const std::string range = fmt::format("{}{}", odd ? fmt::format("odd {} in ", o.ArgStr.str()) : "", support::range_text(lo, hi));
  // The one decimal parser (support/parse_int.h), as the typed options (InRange): "011" is 11, "0x5" refused.
  const support::IntParse p = support::parse_decimal(arg, lo, hi);
  if (p.status == support::IntStatus::kMalformed)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}='{}' is not a decimal integer; supported: {}",
                                               option_label(o), support::clip(arg), range));
  if (p.status == support::IntStatus::kOutOfRange || (odd && p.value % 2 == 0))
    throw SpecError(fmt::format("lkjit: error: {}={} is out of range; supported: {}", option_label(o), support::clip(arg), range));
  return static_cast<int>(p.value);
}

std::vector<int> parse_int_list(const std::string& s, const char* what, int lo, int hi, bool odd) {
  split_list(s, what);  // no empty list or item
  return parse_ints(s, what + 2, lo, hi, odd);
}

// ---- options against the op -----------------------------------------------------------------------
namespace {

// The families whose category holds o.
std::vector<OpCli*> owners(const cl::Option& o) {
  std::vector<OpCli*> v;
  for (OpCli* f : op_clis())
    if (std::find(o.Categories.begin(), o.Categories.end(), &f->category()) != o.Categories.end()) v.push_back(f);
  return v;
}

}  // namespace

std::vector<const cl::Option*> given_family_options(Cmd c) {
  std::vector<const cl::Option*> v;
  for (const auto& e : cl::getRegisteredOptions(subcommand(c))) {
    const cl::Option* o = e.second;
    if (o->getNumOccurrences() && !owners(*o).empty() && std::find(v.begin(), v.end(), o) == v.end()) v.push_back(o);
  }
  std::sort(v.begin(), v.end(), [](const cl::Option* a, const cl::Option* b) { return a->getPosition() < b->getPosition(); });
  return v;
}

bool family_option_given(Cmd c) { return !given_family_options(c).empty(); }

std::string op_origin(const std::string& op) { return op.empty() ? " (the default without --op)" : ""; }

void check_family_options(Cmd c, const std::vector<OpCli*>& ops, const std::string& chosen_by) {
  for (const cl::Option* o : given_family_options(c)) {
    const auto w = owners(*o);
    if (std::any_of(w.begin(), w.end(), [&](OpCli* f) { return std::find(ops.begin(), ops.end(), f) != ops.end(); }))
      continue;
    std::string belongs, chosen;
    for (const OpCli* f : w) belongs += (belongs.empty() ? "" : " | ") + std::string(f->name());
    for (const OpCli* f : ops) chosen += (chosen.empty() ? "" : ", ") + std::string(f->name());
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: {} is an option of --op {}, not of --op {}{}",
                                               cmd_name(c), option_label(*o), belongs, chosen, chosen_by));
  }
}

// ---- presets --------------------------------------------------------------------------------------
std::string preset_names() {
  std::string s;
  for (const OpCli* f : op_clis())
    for (const auto& p : f->presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

std::vector<LayerProblem> preset_layers(const std::string& name, const std::string& where) {
  std::vector<LayerProblem> layers;
  std::string owner;
  for (const OpCli* f : op_clis())
    for (const auto& p : f->presets()) {
      if (p.name != name) continue;
      // Two families with one preset name would make --preset ambiguous: a bug of the registry.
      if (!owner.empty())
        throw std::logic_error(fmt::format("preset '{}' is declared by both {} and {}", name, owner, f->name()));
      owner = f->name();
      layers = p.layers;
    }
  if (owner.empty())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {} '{}' is unknown; supported: {}", where, name, preset_names()));
  return layers;
}

double median_ms(int iters, const std::function<void()>& pass) {
  for (int i = 0; i < 3; ++i) pass();
  EventTimer timer;
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    timer.start();
    pass();
    ms.push_back(timer.stop_ms());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return double(ms[ms.size() / 2]);
}

}  // namespace lkjit::tool
