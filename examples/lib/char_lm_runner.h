// How examples/char_lm.cc runs its GPT (lib/gpt.h): the train step, the validation
// loss and the generation logits, over a Session (--api=session) or as braze::Functions
// (--api=function), compiled as --jit says.
//
// --api=session: one graph with three placeholders, the train step's tokens [batch, T],
// the evaluation's [-1, T] and generation's [1, -1] (a symbolic length: one compiled
// kernel set serves every prompt length from 16 to T), built under JitScope with
// --jit=scope; one Session runs all three, so they share the variables.
// --api=function: three Functions capturing the model's variables (FunctionOptions::
// graph), input signatures [-1, T] (train, evaluate) and [1, -1] (generate); AdamW's
// slots are made by the train step's one trace.
#ifndef BRAZE_EXAMPLES_LIB_CHAR_LM_RUNNER_H_
#define BRAZE_EXAMPLES_LIB_CHAR_LM_RUNNER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "braze/braze.h"
#include "braze/checkpoint.h"
#include "lib/gpt.h"
#include "lib/trainer.h"

namespace braze_examples {

struct CharLmOptions {
  JitMode jit = JitMode::kScope;
  Api api = Api::kSession;
  std::string device = "auto";
  AttentionImpl attention = AttentionImpl::kUnfused;
  // The mixed-precision policy the model is built under (braze/precision.h); f32: none.
  braze::DType precision = braze::DType::kF32;
};

class CharLmRunner {
 public:
  virtual ~CharLmRunner() = default;
  // Compiles (or traces) the train step for inputs of this shape, before the timing.
  virtual absl::Status Compile(const braze::HostTensor& inputs,
                               const braze::HostTensor& targets) = 0;
  // One optimizer step on inputs and targets [batch, T] (i32); the batch's loss.
  virtual absl::StatusOr<double> TrainStep(const braze::HostTensor& inputs,
                                           const braze::HostTensor& targets) = 0;
  // Mean cross entropy (nats) of targets [N, T] given inputs [N, T], dropout off.
  virtual absl::StatusOr<double> Evaluate(const braze::HostTensor& inputs,
                                          const braze::HostTensor& targets) = 0;
  // Logits [L, V] of tokens [1, L], L <= T, dropout off.
  virtual absl::StatusOr<braze::HostTensor> Logits(const braze::HostTensor& tokens) = 0;
  virtual braze::SessionStats TrainStats() const = 0;
  // Every variable of the model (AdamW's slots and the step counter included), read and
  // assigned where the runs keep them; after Compile (a Function's trace makes slots).
  virtual braze::VariableSet Variables() = 0;
  virtual std::string Describe() const = 0;         // "--api=session --jit=scope ..."
  virtual std::string Summary() const = 0;          // graph nodes, runs, compiles
  virtual std::string GenerateSummary() const = 0;  // what generation compiled
  int64_t num_parameters() const { return num_parameters_; }

 protected:
  int64_t num_parameters_ = 0;
};

// InvalidArgument on a config that cannot build (MakeGptParams), or a graph error.
absl::StatusOr<std::unique_ptr<CharLmRunner>> MakeCharLmRunner(const CharLmOptions& options,
                                                               const GptConfig& config,
                                                               const GptTrainConfig& train,
                                                               int64_t batch);

}  // namespace braze_examples

#endif  // BRAZE_EXAMPLES_LIB_CHAR_LM_RUNNER_H_
