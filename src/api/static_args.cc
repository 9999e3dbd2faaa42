#include "api/static_args.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "braze/ops.h"

namespace braze {

// ---- the public value types (braze/function.h) ----

std::string StaticValueString(const StaticValue& value) {
  struct Words {
    std::string operator()(bool v) const { return absl::StrCat("bool ", v ? "true" : "false"); }
    std::string operator()(int64_t v) const { return absl::StrCat("int ", v); }
    std::string operator()(double v) const { return absl::StrCat("double ", v); }
    std::string operator()(const std::string& v) const {
      return absl::StrCat("string \"", v, "\"");
    }
  };
  return std::visit(Words{}, value);
}

namespace {

std::string Kind(const TracedArg& a) {
  return a.is_tensor() ? std::string("a tensor") : StaticValueString(a.value());
}

[[noreturn]] void WrongKind(const TracedArg& a, const char* wanted) {
  throw api::ArgKindError(
      absl::StrCat("argument ", a.index(), " is ", Kind(a), ", but the body asked for ", wanted));
}

}  // namespace

const Tensor& TracedArg::tensor() const {
  if (value_.has_value()) WrongKind(*this, "a tensor");
  return tensor_;
}

const StaticValue& TracedArg::value() const {
  if (!value_.has_value()) {
    throw api::ArgKindError(
        absl::StrCat("argument ", index_, " is a tensor, but the body asked for a static value"));
  }
  return *value_;
}

bool TracedArg::Bool() const {
  if (const bool* v = std::get_if<bool>(&value())) return *v;
  WrongKind(*this, "a bool");
}

int64_t TracedArg::Int() const {
  if (const int64_t* v = std::get_if<int64_t>(&value())) return *v;
  WrongKind(*this, "an int");
}

double TracedArg::Double() const {
  if (const double* v = std::get_if<double>(&value())) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&value())) return static_cast<double>(*v);
  WrongKind(*this, "a double");
}

const std::string& TracedArg::String() const {
  if (const std::string* v = std::get_if<std::string>(&value())) return *v;
  WrongKind(*this, "a string");
}

namespace api {

StaticKey TensorsOnly(size_t count) { return StaticKey(count); }

bool HasStatic(const StaticKey& key) {
  return std::any_of(key.begin(), key.end(), [](const auto& v) { return v.has_value(); });
}

void SplitArgs(const std::vector<Arg>& args, std::vector<HostTensor>* tensors, StaticKey* key) {
  tensors->clear();
  key->clear();
  for (const Arg& a : args) {
    key->push_back(a.value());
    if (a.is_tensor()) tensors->push_back(a.tensor());
  }
}

absl::Status CheckPattern(const std::string& name, const StaticKey& first, const StaticKey& call) {
  if (first.size() != call.size()) {
    return absl::InvalidArgumentError(absl::StrCat("function '", name, "' takes ", first.size(),
                                                   " arguments (as traced first), got ",
                                                   call.size()));
  }
  for (size_t i = 0; i < call.size(); ++i) {
    if (first[i].has_value() == call[i].has_value()) continue;
    return absl::InvalidArgumentError(
        call[i].has_value()
            ? absl::StrCat("function '", name, "': argument ", i, " is a static value (",
                           StaticValueString(*call[i]),
                           "), but the function's first trace took a tensor there")
            : absl::StrCat("function '", name, "': argument ", i,
                           " is a tensor, but the function's first trace took a static value "
                           "there (",
                           StaticValueString(*first[i]), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTensorsAgainst(const std::string& name, const Signature& spec,
                                 const StaticKey& key, const Signature& tensors) {
  std::vector<size_t> position;  // of each tensor in the call
  for (size_t i = 0; i < key.size(); ++i) {
    // A static value that the remaining specs need as a tensor: every argument from here
    // on would have to be one to fill them.
    const size_t specs_left = spec.size() - std::min(spec.size(), position.size());
    if (key[i].has_value() && specs_left > 0 && key.size() - i <= specs_left) {
      return absl::InvalidArgumentError(absl::StrCat(
          "function '", name, "': argument ", i, " is a static value (", StaticValueString(*key[i]),
          "), but input_signature expects a tensor there (",
          TypeString({spec[position.size()].dtype, spec[position.size()].shape}),
          "); input_signature covers the tensor arguments only"));
    }
    if (!key[i].has_value()) position.push_back(i);
  }
  if (spec.size() != tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat("function '", name, "' takes ", spec.size(),
                                                   " tensor arguments (input_signature), got ",
                                                   tensors.size()));
  }
  for (size_t t = 0; t < spec.size(); ++t) {
    const absl::Status s = CheckAgainst(name, {spec[t]}, {tensors[t]});
    if (s.ok()) continue;
    // CheckAgainst named it "argument 0": the call's position instead.
    std::string message(s.message());
    const std::string was = absl::StrCat("function '", name, "': argument 0");
    if (absl::StartsWith(message, was)) {
      message =
          absl::StrCat("function '", name, "': argument ", position[t], message.substr(was.size()));
    }
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}

bool SameValue(const StaticValue& a, const StaticValue& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    const double y = std::get<double>(b);
    return std::memcmp(x, &y, sizeof(double)) == 0;
  }
  return a == b;
}

bool SameStatics(const StaticKey& a, const StaticKey& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].has_value() != b[i].has_value()) return false;
    if (a[i].has_value() && !SameValue(*a[i], *b[i])) return false;
  }
  return true;
}

std::string ChangedValues(const std::vector<StaticKey>& traced) {
  if (traced.empty()) return "";
  constexpr size_t kShown = 8;
  const StaticKey& first = traced.front();
  std::vector<std::string> parts;
  for (size_t i = 0; i < first.size(); ++i) {
    if (!first[i].has_value()) continue;
    std::vector<StaticValue> values;
    for (const StaticKey& k : traced) {
      if (k.size() != first.size() || !k[i].has_value()) continue;
      auto same = [&](const StaticValue& v) { return SameValue(v, *k[i]); };
      if (std::none_of(values.begin(), values.end(), same)) values.push_back(*k[i]);
    }
    if (values.size() < 2) continue;
    std::vector<std::string> shown;
    for (size_t v = 0; v < values.size() && v < kShown; ++v) {
      shown.push_back(StaticValueString(values[v]));
    }
    parts.push_back(absl::StrCat("argument ", i, " (", absl::StrJoin(shown, ", "),
                                 values.size() > kShown ? ", ...)" : ")"));
  }
  return absl::StrJoin(parts, ", ");
}

std::string RetraceWarning(const std::string& label, const std::vector<Signature>& traced,
                           const std::vector<StaticKey>& statics, size_t calls,
                           bool reduce_retracing) {
  // Static values that changed, then tensor dims (unless only values changed).
  const std::string values = ChangedValues(statics);
  std::string changed = values;
  const bool same_signatures = std::all_of(traced.begin(), traced.end(), [&](const Signature& t) {
    return Covers(t, traced.front()) && Covers(traced.front(), t);
  });
  if (values.empty() || !same_signatures) {
    const bool any_static = std::any_of(statics.begin(), statics.end(), HasStatic);
    absl::StrAppend(&changed, values.empty() ? "" : "; ", any_static ? "tensor " : "",
                    ChangedDims(traced));
  }
  return absl::StrCat(
      label, " has traced ", traced.size(), " times within its last ", calls,
      " calls, which is expensive (each trace builds and compiles a graph). Changed between "
      "traces: ",
      changed,
      values.empty() ? "" : ". Each static value traces anew: pass a value that varies as a tensor",
      ". Give FunctionOptions::input_signature with -1 for dims that vary",
      reduce_retracing ? "." : ", or set reduce_retracing.");
}

std::vector<TracedArg> TraceArgs(Graph& g, const Signature& signature, const StaticKey& statics,
                                 std::vector<Tensor>* inputs) {
  std::vector<TracedArg> args;
  for (size_t i = 0; i < statics.size(); ++i) {
    const int index = static_cast<int>(i);
    if (statics[i].has_value()) {
      args.emplace_back(index, *statics[i]);
      continue;
    }
    const TensorSpec& spec = signature[inputs->size()];
    inputs->push_back(Placeholder(g, spec.dtype, spec.shape, absl::StrCat("arg", i)));
    args.emplace_back(index, inputs->back());
  }
  return args;
}

TracedArgsBody TensorsOnlyBody(FunctionBody body) {
  return [body = std::move(body)](Graph& g, const std::vector<TracedArg>& args) {
    std::vector<Tensor> tensors;
    for (const TracedArg& a : args) tensors.push_back(a.tensor());
    return body(g, tensors);
  };
}

absl::Status CheckTensorsOnly(const std::string& name, const StaticKey& key) {
  for (size_t i = 0; i < key.size(); ++i) {
    if (!key[i].has_value()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "Function '", name, "': argument ", i, " is a static value (", StaticValueString(*key[i]),
        "), but the body takes tensors only (a FunctionBody); a body taking "
        "std::vector<TracedArg> (TracedArgsBody) receives static values"));
  }
  return absl::OkStatus();
}

}  // namespace api
}  // namespace braze
