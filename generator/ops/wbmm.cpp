// The WBMM family (Song et al., ICML 2026; docs/wbmm.md): its spec fields, tile axes and four kernels, as the
// generator's data. The rules, spaces, defaults, geometry and Cfg text are generator/ops/wbmm_geometry.h's;
// this file adapts them to the KernelDef signatures (OpSpec / Tile read by field and axis name).
#include <fmt/format.h>

#include "generator/family.h"
#include "generator/ops/wbmm_geometry.h"

namespace lkjit::gen {
namespace wbmm {
namespace {

void validate_of(const OpSpec& s, std::vector<std::string>& e) { validate(wspec(s), e); }

TileSpace space_of(const OpSpec& o) {
  const WBMMSpec s = wspec(o);
  TileSpace sp;
  for (auto& a : tile_axes(s)) {
    std::string doc;
    for (const auto& d : axis_defs())
      if (a.name == d.name) doc = d.doc;
    sp.axes.push_back({a.name, a.values, doc});
  }
  return sp;
}

std::optional<std::string> reject_of(const OpSpec& o, const Tile& t, const DeviceLimits& d, const Shape* sh) {
  const WBMMSpec s = wspec(o);
  return reject(s, wtile(s, t), d, sh);
}

Tile default_of(const OpSpec& o, const Shape& sh, const DeviceLimits& d) {
  const WBMMSpec s = wspec(o);
  return to_tile(s, default_tile(s, sh, d));
}

LaunchGeometry geometry_of(const OpSpec& o, const Tile& t, const Shape& sh) {
  const WBMMSpec s = wspec(o);
  const WBMMTile w = wtile(s, t);
  LaunchGeometry g = geometry(s, w, sh);
  // What WBMMParams needs beyond the shape (the layer copies these): the windows along H and W, the
  // chunk of tiles a block walks, and the wgrad's partial rows and their floats (scratch).
  g.values["nH"] = ceil_div(sh.H, s.wh);
  g.values["nW"] = ceil_div(sh.W, s.ww);
  if (s.kernel != WBMMKernel::kReduce) {
    g.values["chunk_tiles"] = w.chunk;
    g.values["chunks"] = chunks(s, w, sh);
  }
  if (s.kernel == WBMMKernel::kWgrad) {
    g.values["parts"] = partial_rows(s, w, sh);
    g.values["partial_floats"] = partial_floats(s, w, sh);
    g.values["partial_bias_floats"] = partial_bias_floats(s, w, sh);
  }
  return g;
}

std::string cfg_of(const OpSpec& o, const Tile& t) {
  const WBMMSpec s = wspec(o);
  return cfg_body(s, wtile(s, t));
}

int threads_of_tile(const OpSpec& o, const Tile& t) {
  const WBMMSpec s = wspec(o);
  return threads_of(s, wtile(s, t));
}

// "7x7 table identity bias NCHW": the window, the mode, the terms and the load order (f32: tf32 / exact).
std::string describe_of(const OpSpec& o) {
  const WBMMSpec s = wspec(o);
  std::string d = fmt::format("{}x{} {}", s.wh, s.ww, s.mode == kModeTable ? "table" : "dense");
  if (s.kernel == WBMMKernel::kReduce) return d + (s.bias ? " dbias" : "");
  if (s.dtype == DType::kF32) d += s.tf32 ? " tf32" : " exact";
  d += s.identity ? " identity" : " no-identity";
  if (s.kernel != WBMMKernel::kDgrad && s.bias) d += s.kernel == WBMMKernel::kFwd ? " bias" : " dbias";
  if (s.kernel == WBMMKernel::kWgrad) d += s.fuse_dx ? " dx" : " no-dx";
  return d + (s.layout ? " NHWC" : " NCHW");
}

KernelDef kernel_def_of(WBMMKernel k) {
  KernelDef d;
  d.name = kernel_stem(k);
  d.template_header = template_header(k);
  d.device_fn = device_fn(k);
  d.params_type = kParamsType;
  d.fields = kernel_fields(k);
  d.validate = validate_of;
  d.space = space_of;
  d.reject = reject_of;
  d.default_tile = default_of;
  d.geometry = geometry_of;
  d.cfg_body = cfg_of;
  d.describe = describe_of;
  d.threads = threads_of_tile;
  d.has_dtype = k != WBMMKernel::kReduce;  // fp32 partials whatever the activations' dtype
  return d;
}

}  // namespace
}  // namespace wbmm

FamilyDef wbmm_family() {
  using namespace wbmm;
  FamilyDef f;
  f.name = "wbmm";
  for (const auto& x : spec_fields()) {
    SpecField sf;
    sf.name = x.name, sf.lo = x.lo, sf.hi = x.hi, sf.def = x.def, sf.token = x.token, sf.doc = x.doc;
    f.fields.push_back(sf);
  }
  int rank = 0;
  for (const auto& a : axis_defs()) {
    TileAxisDef ad;
    ad.name = a.name, ad.token = a.token, ad.doc = a.doc, ad.print_rank = rank++;
    f.axes.push_back(ad);
  }
  for (auto k : {WBMMKernel::kFwd, WBMMKernel::kDgrad, WBMMKernel::kWgrad, WBMMKernel::kReduce})
    f.kernels.push_back(kernel_def_of(k));
  return f;
}

}  // namespace lkjit::gen
