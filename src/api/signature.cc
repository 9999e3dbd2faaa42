#include "api/signature.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/status.h"
#include "ir/changing_dims.h"

namespace braze {
namespace api {
namespace {

bool SameKinds(const Signature& a, const Signature& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype != b[i].dtype || a[i].shape.size() != b[i].shape.size()) return false;
  }
  return true;
}

std::string SpecString(const TensorSpec& spec) { return TypeString({spec.dtype, spec.shape}); }

}  // namespace

Signature SignatureOf(const std::vector<HostTensor>& args) {
  Signature s;
  s.reserve(args.size());
  for (const HostTensor& a : args) s.push_back({a.dtype(), a.shape()});
  return s;
}

std::string SignatureString(const Signature& signature) {
  std::vector<std::string> parts;
  for (const TensorSpec& spec : signature) parts.push_back(SpecString(spec));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

bool Covers(const Signature& spec, const Signature& call) {
  if (!SameKinds(spec, call)) return false;
  for (size_t i = 0; i < spec.size(); ++i) {
    for (size_t d = 0; d < spec[i].shape.size(); ++d) {
      if (spec[i].shape[d] != kUnknownDim && spec[i].shape[d] != call[i].shape[d]) return false;
    }
  }
  return true;
}

absl::Status CheckSpec(const std::string& name, const Signature& spec, const char* source) {
  for (size_t i = 0; i < spec.size(); ++i) {
    // Before any call is compared: a -2 was reported as the call's dim differing from "?".
    for (size_t d = 0; d < spec[i].shape.size(); ++d) {
      if (spec[i].shape[d] < kUnknownDim) {
        return absl::InvalidArgumentError(
            absl::StrCat("function '", name, "': ", source, " argument ", i, " has dim ", d, " = ",
                         spec[i].shape[d], " (a dim is >= 0, or -1 for any size)"));
      }
    }
    if (SizeOf(spec[i].dtype) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("function '", name, "': ", source,
                                                     " argument ", i, " has unknown dtype ",
                                                     static_cast<int>(spec[i].dtype)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAgainst(const std::string& name, const Signature& spec, const Signature& call,
                          const char* source) {
  auto error = [&](size_t i, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("function '", name, "': argument ", i, " ", what,
                                                   ": expected ", SpecString(spec[i]), " (", source,
                                                   "), got ", SpecString(call[i])));
  };
  if (spec.size() != call.size()) {
    return absl::InvalidArgumentError(absl::StrCat("function '", name, "' takes ", spec.size(),
                                                   " arguments (", source, "), got ", call.size()));
  }
  BRAZE_RETURN_IF_ERROR(CheckSpec(name, spec, source));
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i].dtype != call[i].dtype) return error(i, "has the wrong dtype");
    if (spec[i].shape.size() != call[i].shape.size()) return error(i, "has the wrong rank");
    for (size_t d = 0; d < spec[i].shape.size(); ++d) {
      if (spec[i].shape[d] != kUnknownDim && spec[i].shape[d] != call[i].shape[d]) {
        return error(i, absl::StrCat("dim ", d, " differs"));
      }
    }
  }
  return absl::OkStatus();
}

Signature Generalize(const Signature& call, const std::vector<Signature>& seen) {
  Signature out = call;
  for (const Signature& s : seen) {
    if (!SameKinds(s, call)) continue;
    for (size_t i = 0; i < call.size(); ++i) {
      for (size_t d = 0; d < call[i].shape.size(); ++d) {
        if (s[i].shape[d] != call[i].shape[d]) out[i].shape[d] = kUnknownDim;
      }
    }
  }
  return out;
}

std::string ChangedDims(const std::vector<Signature>& traced) {
  std::vector<std::vector<TensorType>> types;
  for (const Signature& s : traced) {
    types.emplace_back();
    for (const TensorSpec& spec : s) types.back().push_back({spec.dtype, spec.shape});
  }
  return ChangingDims(types, "argument");
}

}  // namespace api
}  // namespace braze
