// Threads and sessions: sessions on several threads share the process-wide compile and
// buffer caches, and one session's Run may be called from several threads (Runs are
// serialized). These are the tests tools/sanitize.sh runs under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "braze/jit_scope.h"
#include "braze/ops.h"
#include "braze/session.h"

namespace braze {
namespace {

constexpr int kThreads = 4;

// A fused softmax over rows of a batch of any size, and a row sum outside the scope.
struct Model {
  Graph g;
  Tensor x = Placeholder(g, DType::kF32, {-1, 13}, "x");
  Tensor probs, sums;
  Model() {
    {
      JitScope scope(g);
      probs = Softmax(Tanh(x) * 3.0);
    }
    sums = Sum(x, {1});
  }
};

HostTensor Batch(int rows, uint64_t seed) {
  return HostTensor::RandomUniform(DType::kF32, {rows, 13}, seed, -2, 2);
}

void ExpectNear(const HostTensor& got, const HostTensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    ASSERT_NEAR(got.GetDouble(i), want.GetDouble(i), 1e-4 + 2e-3 * std::fabs(want.GetDouble(i)))
        << "element " << i;
  }
}

// Each thread has its own session; batch sizes 1..5 make every thread compile or find
// the same kernels at the same time.
TEST(Concurrency, SessionsOnThreadsShareKernels) {
  Model m;
  std::vector<std::vector<HostTensor>> want(6);
  SessionOptions reference;
  reference.reference_only = true;
  Session ref(m.g, reference);
  for (int rows = 1; rows <= 5; ++rows) {
    auto out = ref.Run({{m.x, Batch(rows, rows)}}, {m.probs, m.sums});
    ASSERT_TRUE(out.ok()) << out.status();
    want[rows] = *std::move(out);
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      SessionOptions options;
      options.strict = true;
      options.num_threads = 2;
      Session session(m.g, options);
      for (int step = 0; step < 10; ++step) {
        const int rows = 1 + (step + t) % 5;
        auto out = session.Run({{m.x, Batch(rows, rows)}}, {m.probs, m.sums});
        if (!out.ok()) {
          ADD_FAILURE() << out.status();
          ++failures;
          return;
        }
        ExpectNear((*out)[0], want[rows][0]);
        ExpectNear((*out)[1], want[rows][1]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

// One session, Runs from several threads: each training step's AssignAdd lands once.
TEST(Concurrency, OneSessionRunFromManyThreads) {
  Graph g;
  Tensor w = Variable(g, HostTensor::From<float>({0, 0, 0}, {3}), "w");
  Tensor step = Placeholder(g, DType::kF32, {3}, "step");
  Tensor update;
  {
    JitScope scope(g);
    update = AssignAdd(w, Abs(step) + 1.0);
  }
  Session session(g);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        absl::Status s =
            session.Run({{step, HostTensor::From<float>({1, -2, 0}, {3})}}, {}, {update}).status();
        EXPECT_TRUE(s.ok()) << s;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  auto value = session.VariableValue(w);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->ToVector<float>(), (std::vector<float>{200, 300, 100}));
  EXPECT_EQ(session.stats().runs, kThreads * 25);
}

}  // namespace
}  // namespace braze
