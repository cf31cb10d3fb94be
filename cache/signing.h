// Ed25519 signatures (RFC 8032, through OpenSSL 3) over what lkjit ships between machines: bundles and
// remote cache values. A writer holds a private key; readers hold a set of trusted public keys and,
// when they have one, refuse what is unsigned or signed by anyone else. A shared writable cache is code
// execution on every GPU that reads it: with signatures, a reader only runs what a trusted writer made.
//
// What is signed (signed_message): a fixed domain tag, the context (what the bytes are, e.g. "bundle" or
// "remote-entry <redis key>"), the signer's key id and the bytes themselves, each length-prefixed. The
// whole message is signed (pure Ed25519, no pre-hash), so there is no digest an attacker could choose,
// a signature for one context never verifies in another, and one made by another key never verifies
// under this key id.
//
// Keys: `openssl genpkey -algorithm ed25519 -out signing.pem` (private, chmod 600) and
// `openssl pkey -in signing.pem -pubout -out signing.pub.pem` (public, to every reader).
// A key id is the hex SHA-256 of the raw 32-byte public key.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lkjit::cache {

// The exact bytes an Ed25519 signature covers.
std::string signed_message(std::string_view context, std::string_view key_id, std::string_view bytes);

constexpr size_t kSignatureBytes = 64;
constexpr size_t kKeyIdHexDigits = 64;

struct Verdict {
  bool ok = false;
  std::string reason;  // why not ok: "signed by key 1a2b.., which is not trusted", "bad signature", ...
};

class Signer {
 public:
  // A PEM Ed25519 private key file. It must be a regular file owned by this user that nobody else can
  // read or write (mode 0600 or 0400): else CacheError naming the file and its mode. CacheError also for
  // a file that is not a PEM private key, or a key of another type.
  static Signer load(const std::string& path);
  // The same from PEM text; `what` names its origin in errors.
  static Signer from_pem(const std::string& pem, const std::string& what);

  const std::string& key_id() const { return key_id_; }
  std::string public_pem() const;
  // The 64-byte signature of signed_message(context, key_id(), bytes).
  std::string sign(std::string_view context, std::string_view bytes) const;

 private:
  std::shared_ptr<void> key_;  // EVP_PKEY
  std::string key_id_;
};

class TrustedKeys {
 public:
  TrustedKeys() = default;
  // Files of PEM public keys (any number of keys each). CacheError naming the file for one that cannot
  // be read, holds no key, or holds a key that is not Ed25519.
  static TrustedKeys load(const std::vector<std::string>& files);
  // One or more PEM public keys; `what` names their origin in errors.
  static TrustedKeys from_pem(const std::string& pem, const std::string& what);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  bool has(std::string_view key_id) const;
  std::vector<std::string> key_ids() const;
  // Whether signature is key_id's signature of signed_message(context, key_id, bytes), key_id trusted.
  Verdict verify(std::string_view context, std::string_view bytes, std::string_view signature,
                 std::string_view key_id) const;

 private:
  struct Key {
    std::string id;
    std::shared_ptr<void> pkey;  // EVP_PKEY
  };
  std::vector<Key> keys_;
};

// A fresh Ed25519 key pair as PEM (PKCS#8 private key, SubjectPublicKeyInfo public key), for tests and
// tools; what `openssl genpkey -algorithm ed25519` makes.
struct KeyPairPem {
  std::string private_pem, public_pem;
};
KeyPairPem generate_key_pair();

// Lowercase hex of bytes, and back (false for an odd length or a character that is not a hex digit).
std::string to_hex(std::string_view bytes);
bool from_hex(std::string_view hex, std::string* out);

}  // namespace lkjit::cache
