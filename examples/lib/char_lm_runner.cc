#include "lib/char_lm_runner.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace braze_examples {
namespace {

using braze::DType;
using braze::HostTensor;
using braze::Tensor;

// What the runs launched, per run: fused clusters, single-op kernels, reference kernels.
std::string Launches(const braze::SessionStats& s) {
  const double runs = static_cast<double>(std::max<int64_t>(s.runs, 1));
  return absl::StrFormat(
      "per run %.1f cluster launches, %.1f single-op kernels, %.1f reference kernels",
      s.cluster_launches / runs, s.single_op_launches / runs, s.reference_launches / runs);
}

int64_t CountParameters(const GptParams& params) {
  int64_t n = 0;
  for (const Tensor& v : AllVariables(params)) {
    int64_t size = 1;
    for (int64_t d : v.shape()) size *= d;
    n += size;
  }
  return n;
}

// What the model and its train step share, whichever API runs them.
struct Model {
  GptConfig config;
  GptTrainConfig train;
  AttentionImpl attention;
  GptParams params;
  Tensor step;  // the step counter: keys dropout, counts AdamW's schedule

  GptForward Forward(bool training) const {
    GptForward f;
    f.attention = attention;
    if (training) {
      f.dropout.rate = config.dropout;
      f.dropout.step = step;
      f.dropout.seed = config.seed;
    }
    return f;
  }
  // The train step: the loss, and the update ops in `ops`.
  absl::StatusOr<Tensor> TrainLoss(Tensor inputs, Tensor targets, std::vector<Tensor>* ops) const {
    Tensor loss = GptLoss(GptLogits(params, config, inputs, Forward(true)), targets, config.vocab);
    BRAZE_ASSIGN_OR_RETURN(*ops, GptTrainOps(train, loss, AllVariables(params), step));
    return loss;
  }
  Tensor EvalLoss(Tensor inputs, Tensor targets) const {
    return GptLoss(GptLogits(params, config, inputs, Forward(false)), targets, config.vocab);
  }
  Tensor Logits(Tensor tokens) const { return GptLogits(params, config, tokens, Forward(false)); }
};

absl::StatusOr<std::unique_ptr<Model>> MakeModel(braze::Graph& g, const GptConfig& config,
                                                 const GptTrainConfig& train,
                                                 AttentionImpl attention) {
  auto m = std::make_unique<Model>();
  m->config = config;
  m->train = train;
  m->attention = attention;
  BRAZE_ASSIGN_OR_RETURN(m->params, MakeGptParams(g, config));
  m->step = MakeStepCounter(g, "train_step_counter");
  return m;
}

std::string DescribeOptions(const CharLmOptions& o, const char* api) {
  return absl::StrFormat("--api=%s --jit=%s --device=%s --attention=%s --precision=%s", api,
                         JitModeName(o.jit), o.device,
                         o.attention == AttentionImpl::kFused ? "fused" : "unfused",
                         braze::DTypeName(o.precision));
}

class SessionRunner : public CharLmRunner {
 public:
  absl::Status Build(const CharLmOptions& options, const GptConfig& config,
                     const GptTrainConfig& train, int64_t batch) {
    options_ = options;
    BRAZE_ASSIGN_OR_RETURN(model_, MakeModel(g_, config, train, options.attention));
    num_parameters_ = CountParameters(model_->params);
    const int64_t T = config.context;
    inputs_ = braze::Placeholder(g_, DType::kI32, {batch, T}, "inputs");
    targets_ = braze::Placeholder(g_, DType::kI32, {batch, T}, "targets");
    eval_inputs_ = braze::Placeholder(g_, DType::kI32, {-1, T}, "eval_inputs");
    eval_targets_ = braze::Placeholder(g_, DType::kI32, {-1, T}, "eval_targets");
    tokens_ = braze::Placeholder(g_, DType::kI32, {1, -1}, "tokens");
    {
      // The model, loss, gradients and updates may be compiled and fused; placeholders
      // and variables stay outside (sources, not computation).
      std::optional<braze::JitScope> scope;
      if (options.jit == JitMode::kScope) scope.emplace(g_);
      braze::PrecisionScope policy(g_, options.precision);
      BRAZE_ASSIGN_OR_RETURN(loss_, model_->TrainLoss(inputs_, targets_, &train_ops_));
      eval_loss_ = model_->EvalLoss(eval_inputs_, eval_targets_);
      logits_ = model_->Logits(tokens_);
    }
    BRAZE_RETURN_IF_ERROR(g_.status());
    braze::SessionOptions so = SessionOptionsFor(options.jit, options.device);
    so.max_cluster_size = kGptMaxClusterSize;
    session_ = std::make_unique<braze::Session>(g_, so);
    return absl::OkStatus();
  }

  absl::Status Compile(const HostTensor& inputs, const HostTensor& targets) override {
    return session_->Compile({{inputs_, inputs}, {targets_, targets}}, {loss_}, train_ops_);
  }
  absl::StatusOr<double> TrainStep(const HostTensor& inputs, const HostTensor& targets) override {
    BRAZE_RETURN_IF_ERROR(
        session_->RunInto({{inputs_, inputs}, {targets_, targets}}, {loss_}, &out_, train_ops_));
    return out_[0].GetDouble(0);
  }
  absl::StatusOr<double> Evaluate(const HostTensor& inputs, const HostTensor& targets) override {
    std::vector<HostTensor> out;
    BRAZE_RETURN_IF_ERROR(
        session_->RunInto({{eval_inputs_, inputs}, {eval_targets_, targets}}, {eval_loss_}, &out));
    return out[0].GetDouble(0);
  }
  absl::StatusOr<HostTensor> Logits(const HostTensor& tokens) override {
    if (!generating_) before_generation_ = session_->stats();
    generating_ = true;
    std::vector<HostTensor> out;
    BRAZE_RETURN_IF_ERROR(session_->RunInto({{tokens_, tokens}}, {logits_}, &out));
    return std::move(out[0]);
  }
  braze::SessionStats TrainStats() const override { return session_->stats(); }
  braze::VariableSet Variables() override { return braze::SessionVariables(*session_); }
  std::string Describe() const override { return DescribeOptions(options_, "session"); }
  std::string Summary() const override {
    const braze::SessionStats s = session_->stats();
    return absl::StrFormat("session: %d graph nodes, %lld runs, %lld compiles (%.0f ms), %s",
                           g_.num_nodes(), static_cast<long long>(s.runs),
                           static_cast<long long>(s.compiles), s.compile_ms, Launches(s));
  }
  std::string GenerateSummary() const override {
    const braze::SessionStats s = session_->stats();
    return absl::StrFormat("%lld runs of the [1, -1] graph compiled %lld kernels",
                           static_cast<long long>(s.runs - before_generation_.runs),
                           static_cast<long long>(s.compiles - before_generation_.compiles));
  }

 private:
  CharLmOptions options_;
  braze::Graph g_;
  std::unique_ptr<Model> model_;
  Tensor inputs_, targets_, eval_inputs_, eval_targets_, tokens_;
  Tensor loss_, eval_loss_, logits_;
  std::vector<Tensor> train_ops_;
  std::unique_ptr<braze::Session> session_;
  std::vector<HostTensor> out_;
  bool generating_ = false;
  braze::SessionStats before_generation_;
};

class FunctionRunner : public CharLmRunner {
 public:
  absl::Status Build(const CharLmOptions& options, const GptConfig& config,
                     const GptTrainConfig& train, int64_t batch) {
    options_ = options;
    BRAZE_ASSIGN_OR_RETURN(model_, MakeModel(g_, config, train, options.attention));
    num_parameters_ = CountParameters(model_->params);
    braze::FunctionOptions fo;
    fo.graph = &g_;
    SetFunctionOptions(options.jit, options.device, &fo);
    fo.session.max_cluster_size = kGptMaxClusterSize;
    fo.precision = options.precision;
    const braze::TensorSpec windows{DType::kI32, {-1, config.context}};
    const Model* m = model_.get();
    // A C++ body cannot return a Status: a failed build is thrown, and the Function
    // reports it as its call's Status.
    fo.name = "train_step";
    fo.input_signature = std::vector<braze::TensorSpec>{windows, windows};
    train_ = std::make_unique<braze::Function>(
        [m](braze::Graph&, const std::vector<Tensor>& args) {
          std::vector<Tensor> ops;  // run on every call (automatic control dependencies)
          absl::StatusOr<Tensor> loss = m->TrainLoss(args[0], args[1], &ops);
          if (!loss.ok()) throw std::runtime_error(std::string(loss.status().message()));
          return std::vector<Tensor>{*loss};
        },
        fo);
    fo.name = "evaluate";
    evaluate_ = std::make_unique<braze::Function>(
        [m](braze::Graph&, const std::vector<Tensor>& args) {
          return std::vector<Tensor>{m->EvalLoss(args[0], args[1])};
        },
        fo);
    fo.name = "generate";
    fo.input_signature = std::vector<braze::TensorSpec>{{DType::kI32, {1, -1}}};
    generate_ = std::make_unique<braze::Function>(
        [m](braze::Graph&, const std::vector<Tensor>& args) {
          return std::vector<Tensor>{m->Logits(args[0])};
        },
        fo);
    return absl::OkStatus();
  }

  absl::Status Compile(const HostTensor& inputs, const HostTensor& targets) override {
    return train_->GetConcreteFunction(*train_->options().input_signature).status();
  }
  absl::StatusOr<double> TrainStep(const HostTensor& inputs, const HostTensor& targets) override {
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, (*train_)({inputs, targets}));
    return out[0].GetDouble(0);
  }
  absl::StatusOr<double> Evaluate(const HostTensor& inputs, const HostTensor& targets) override {
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, (*evaluate_)({inputs, targets}));
    return out[0].GetDouble(0);
  }
  absl::StatusOr<HostTensor> Logits(const HostTensor& tokens) override {
    BRAZE_ASSIGN_OR_RETURN(std::vector<HostTensor> out, (*generate_)({tokens}));
    return std::move(out[0]);
  }
  braze::SessionStats TrainStats() const override { return train_->stats(); }
  braze::VariableSet Variables() override { return braze::FunctionVariables(g_); }
  std::string Describe() const override { return DescribeOptions(options_, "function"); }
  std::string Summary() const override {
    const braze::SessionStats s = train_->stats();
    return absl::StrFormat(
        "functions: train_step traced %d time(s), evaluate %d; %d graph nodes; train_step: "
        "%lld runs, %lld compiles (%.0f ms), %s",
        train_->tracing_count(), evaluate_->tracing_count(), g_.num_nodes(),
        static_cast<long long>(s.runs), static_cast<long long>(s.compiles), s.compile_ms,
        Launches(s));
  }
  std::string GenerateSummary() const override {
    const braze::SessionStats s = generate_->stats();
    return absl::StrFormat("generate traced %d time(s), %lld runs, %lld kernels compiled",
                           generate_->tracing_count(), static_cast<long long>(s.runs),
                           static_cast<long long>(s.compiles));
  }

 private:
  CharLmOptions options_;
  braze::Graph g_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<braze::Function> train_, evaluate_, generate_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CharLmRunner>> MakeCharLmRunner(const CharLmOptions& options,
                                                               const GptConfig& config,
                                                               const GptTrainConfig& train,
                                                               int64_t batch) {
  if (options.api == Api::kFunction) {
    auto r = std::make_unique<FunctionRunner>();
    BRAZE_RETURN_IF_ERROR(r->Build(options, config, train, batch));
    return std::unique_ptr<CharLmRunner>(std::move(r));
  }
  auto r = std::make_unique<SessionRunner>();
  BRAZE_RETURN_IF_ERROR(r->Build(options, config, train, batch));
  return std::unique_ptr<CharLmRunner>(std::move(r));
}

}  // namespace braze_examples
