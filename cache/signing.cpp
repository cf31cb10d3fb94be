#include "cache/signing.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cache/entry.h"
#include "cache/file_io.h"
#include "cache/key.h"
#include "lkjit/error.h"
#include "support/read_file.h"

namespace lkjit::cache {
namespace {

constexpr const char* kDomain = "lkjit-signature-v1";
constexpr size_t kMaxKeyFileBytes = 1 << 20;

std::shared_ptr<void> own(EVP_PKEY* k) { return std::shared_ptr<void>(k, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); }); }
EVP_PKEY* raw(const std::shared_ptr<void>& p) { return static_cast<EVP_PKEY*>(p.get()); }

// OpenSSL's queued errors as one line (and the queue cleared).
std::string openssl_error() {
  std::string s;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    s += (s.empty() ? "" : "; ") + std::string(buf);
  }
  return s.empty() ? "no detail from OpenSSL" : s;
}

std::string key_id_of(EVP_PKEY* k) {
  unsigned char pub[32];
  size_t n = sizeof pub;
  if (EVP_PKEY_get_raw_public_key(k, pub, &n) != 1 || n != sizeof pub) return {};
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(pub), n));
}

// Key files are read through the one bounded reader (support/read_file.h): the size bound comes first, so a
// huge or endless file is refused before any of it is read, and a FIFO at the path never blocks. The mode
// and owner are those of the file that was opened (fstat), not of whatever the path named a moment before.
std::string read_key_file(const std::string& path, const char* what, struct stat* st) {
  support::ReadOptions o;
  o.max_bytes = kMaxKeyFileBytes;
  o.what = what;
  support::ReadResult r = support::read_file(path, o);
  if (r.status == support::ReadStatus::kNotRegular)
    throw CacheError(fmt::format("lkjit: error: {}: the {} is not a regular file ({})", path, what, r.reason));
  if (r.status == support::ReadStatus::kTooLarge)
    throw CacheError(fmt::format("lkjit: error: {}: the {} is {} bytes; supported: at most {}", path, what,
                                 r.file_size, kMaxKeyFileBytes));
  if (!r.ok()) throw CacheError(fmt::format("lkjit: error: {}: cannot read the {}: {}", path, what, r.reason));
  st->st_mode = r.mode;
  st->st_uid = r.owner_uid;
  return std::move(r.bytes);
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

}  // namespace

std::string to_hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    s += d[(static_cast<unsigned char>(c) >> 4) & 0xf];
    s += d[static_cast<unsigned char>(c) & 0xf];
  }
  return s;
}

bool from_hex(std::string_view hex, std::string* out) {
  if (hex.size() % 2) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

std::string signed_message(std::string_view context, std::string_view key_id, std::string_view bytes) {
  std::string m = fmt::format("{}\ncontext {} ", kDomain, context.size());
  m += context;
  m += fmt::format("\nkey {} ", key_id.size());
  m += key_id;
  m += fmt::format("\nbytes {}\n", bytes.size());
  m += bytes;
  return m;
}

Signer Signer::from_pem(const std::string& pem, const std::string& what) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EVP_PKEY* k = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  if (!k)
    throw CacheError(fmt::format("lkjit: error: {}: not a PEM private key ({}); supported: an Ed25519 key from "
                                 "`openssl genpkey -algorithm ed25519`", what, openssl_error()));
  Signer s;
  s.key_ = own(k);
  if (EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519)
    throw CacheError(fmt::format("lkjit: error: {}: the private key is of type {}; supported: Ed25519 "
                                 "(`openssl genpkey -algorithm ed25519`)", what, OBJ_nid2sn(EVP_PKEY_get_base_id(k))));
  s.key_id_ = key_id_of(k);
  return s;
}

Signer Signer::load(const std::string& path) {
  struct stat st {};
  const std::string pem = read_key_file(path, "signing key", &st);
  // Checked on the file that was read: a key others can read is a key others can sign with.
  if (st.st_uid != ::getuid())
    throw CacheError(fmt::format("lkjit: error: {}: the signing key is owned by uid {}, not by this user ({})", path,
                                 st.st_uid, ::getuid()));
  if (st.st_mode & 077)
    throw CacheError(fmt::format("lkjit: error: {}: the signing key has mode {:04o}, so other users can read or change "
                                 "it; supported: a file only its owner can read (chmod 600 {})",
                                 path, st.st_mode & 07777, path));
  return from_pem(pem, path);
}

std::string Signer::public_pem() const {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), raw(key_)) != 1) return {};
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string Signer::sign(std::string_view context, std::string_view bytes) const {
  const std::string msg = signed_message(context, key_id_, bytes);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::string sig(kSignatureBytes, '\0');
  size_t n = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, raw(key_)) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &n,
                     reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) != 1 ||
      n != kSignatureBytes)
    throw CacheError("lkjit: error: Ed25519 signing failed: " + openssl_error());
  return sig;
}

TrustedKeys TrustedKeys::from_pem(const std::string& pem, const std::string& what) {
  TrustedKeys t;
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  for (;;) {
    EVP_PKEY* k = bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr;
    if (!k) break;
    auto owned = own(k);
    if (EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519)
      throw CacheError(fmt::format("lkjit: error: {}: trusted key {} is of type {}; supported: Ed25519", what,
                                   t.keys_.size() + 1, OBJ_nid2sn(EVP_PKEY_get_base_id(k))));
    const std::string id = key_id_of(k);
    if (!t.has(id)) t.keys_.push_back({id, owned});
  }
  ERR_clear_error();  // the end of the PEM stream reads as an error
  if (t.keys_.empty())
    throw CacheError(fmt::format("lkjit: error: {}: holds no PEM public key; supported: keys from "
                                 "`openssl pkey -in KEY.pem -pubout`", what));
  return t;
}

TrustedKeys TrustedKeys::load(const std::vector<std::string>& files) {
  TrustedKeys all;
  for (const auto& f : files) {
    struct stat st {};
    TrustedKeys one = from_pem(read_key_file(f, "trusted key file", &st), f);
    for (auto& k : one.keys_)
      if (!all.has(k.id)) all.keys_.push_back(std::move(k));
  }
  return all;
}

bool TrustedKeys::has(std::string_view key_id) const {
  return std::any_of(keys_.begin(), keys_.end(), [&](const Key& k) { return k.id == key_id; });
}

std::vector<std::string> TrustedKeys::key_ids() const {
  std::vector<std::string> ids;
  for (const auto& k : keys_) ids.push_back(k.id);
  return ids;
}

Verdict TrustedKeys::verify(std::string_view context, std::string_view bytes, std::string_view signature,
                            std::string_view key_id) const {
  const auto it = std::find_if(keys_.begin(), keys_.end(), [&](const Key& k) { return k.id == key_id; });
  if (it == keys_.end())
    return {false, fmt::format("signed by key {}, which is not trusted ({} trusted key(s))",
                               escape_bytes(key_id.substr(0, 16)), keys_.size())};
  if (signature.size() != kSignatureBytes)
    return {false, fmt::format("signature is {} bytes, expected {}", signature.size(), kSignatureBytes)};
  const std::string msg = signed_message(context, key_id, bytes);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, raw(it->pkey)) == 1 &&
                  EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                                   reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) == 1;
  ERR_clear_error();
  if (!ok) return {false, fmt::format("bad signature by key {} (the bytes changed after signing, or it was made for "
                                      "other bytes)", escape_bytes(key_id.substr(0, 16)))};
  return {true, {}};
}

KeyPairPem generate_key_pair() {
  EVP_PKEY* k = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (!k) throw CacheError("lkjit: error: Ed25519 key generation failed: " + openssl_error());
  auto owned = own(k);
  KeyPairPem out;
  std::unique_ptr<BIO, BioDeleter> priv(BIO_new(BIO_s_mem())), pub(BIO_new(BIO_s_mem()));
  if (!priv || !pub || PEM_write_bio_PrivateKey(priv.get(), k, nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), k) != 1)
    throw CacheError("lkjit: error: cannot write an Ed25519 key as PEM: " + openssl_error());
  char* data = nullptr;
  long n = BIO_get_mem_data(priv.get(), &data);
  out.private_pem.assign(data, static_cast<size_t>(n));
  n = BIO_get_mem_data(pub.get(), &data);
  out.public_pem.assign(data, static_cast<size_t>(n));
  return out;
}

}  // namespace lkjit::cache
