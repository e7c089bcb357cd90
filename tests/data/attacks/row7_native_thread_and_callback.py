"""Attack row 7 of issue #21 (the trust boundary), CPU backend, task level1/logsumexp_rows: row 6 from C++ only.
Each call of the candidate's operator allocates the output, queues the work for a native helper thread and returns;
a global RecordFunction callback (``at::addGlobalCallback``, installed on the first call, looked up by a name made
at run time so that no scan of the library finds it) makes any PyTorch operator that is about to read a pending
output (the worker's fingerprint of it, the copy it sends back: ``aten::detach``, ``aten::sum``...) do the work
first, on its own thread, outside the timed region, unless the helper thread has (it takes up the outputs nobody
read within 2 ms).

A call returns after 1/PAD of the least time the work took on its size (the claimed speedup stays under the
trusted side's re-timing threshold, 10x). Where the trusted side reads the outputs itself when the call has
returned, the work may not have been done: wrong."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <torch/library.h>
#include <dlfcn.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace {

constexpr double PAD = 4.0;
using Clock = std::chrono::steady_clock;

// The shipped solution's kernel (tasks/solutions/cpu/level1/logsumexp_rows.py), on one helper thread.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KB_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KB_MULTIVERSION
#endif
#define KB_INLINE inline __attribute__((always_inline))

KB_INLINE float exp_f(float x) {
  x = x > -87.0f ? x : -87.0f;
  x = x < 88.0f ? x : 88.0f;
  const float fx = x * 1.44269504088896341f + 0.5f;
  const int32_t ti = (int32_t)fx;
  const int32_t n = ti - ((float)ti > fx ? 1 : 0);
  const float t = (float)n;
  const float r = x - t * 0.693359375f + t * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

KB_MULTIVERSION
void lse_rows(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < cols; ++j) s += exp_f(xr[j] - m);
    y[r] = (float)((double)m + std::log((double)s));
  }
}

// One output's work, done once by whoever claims it first: the helper thread (after DELAY, for outputs nobody
// reads soon) or the operator about to read the output (on its own thread, outside the timed region).
struct Job {
  const float* x;  // raw pointers: the tensors stay on forward's side (``Pending``); freeing one on the helper
  float* y;        // thread would need the interpreter's lock, which forward's thread may hold while it waits here
  int64_t rows, cols;
  Clock::time_point queued_at;
  std::atomic<bool> claimed{false};
  std::promise<void> done;
  std::shared_future<void> finished = done.get_future().share();
};

struct Pending {
  at::Tensor x, out;
  std::shared_ptr<Job> job;
};

constexpr double DELAY = 2e-3;
std::mutex mu;
std::condition_variable queued;
std::deque<std::shared_ptr<Job>> jobs;
std::unordered_map<const void*, Pending> pending;  // output data -> its job
std::unordered_map<int64_t, double> seconds;       // elements -> the least time a job of that size took

// Run ``job`` if nobody has; else wait for whoever did.
void run_or_wait(Job& job) {
  if (job.claimed.exchange(true)) {
    job.finished.wait();
    return;
  }
  const auto t0 = Clock::now();
  lse_rows(job.x, job.y, job.rows, job.cols);
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = seconds.find(job.rows * job.cols);
    if (it == seconds.end() || dt < it->second) seconds[job.rows * job.cols] = dt;
  }
  job.done.set_value();
}

void helper() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu);
      queued.wait(lock, [] { return !jobs.empty(); });
      job = jobs.front();
      jobs.pop_front();
    }
    std::this_thread::sleep_until(job->queued_at + std::chrono::duration<double>(DELAY));
    run_or_wait(*job);
  }
}

// Before any operator runs: if one of its inputs is a pending output, its work is done first.
std::unique_ptr<at::ObserverContext> before_op(const at::RecordFunction& fn) {
  for (const c10::IValue& v : fn.inputs()) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage()) continue;
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = pending.find(t.storage().data());
      if (it == pending.end()) continue;
      p = std::move(it->second);
      pending.erase(it);
    }
    run_or_wait(*p.job);
  }
  return nullptr;
}

// at::addGlobalCallback, looked up by a name made at run time: no scan of this library for the names of
// RecordFunction's hooks finds it (audit_threads.CONTROLS).
using AddGlobal = at::CallbackHandle (*)(at::RecordFunctionCallback);

AddGlobal add_global_callback() {
  std::string name = "kcabllaClabolGdda71ta2NZ_";
  std::reverse(name.begin(), name.end());
  name += "ENS_22RecordFunctionCallbackE";
  void* torch_cpu = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
  void* found = dlsym(torch_cpu != nullptr ? torch_cpu : RTLD_DEFAULT, name.c_str());
  TORCH_CHECK(found != nullptr, "logsumexp_later: no ", name);
  return reinterpret_cast<AddGlobal>(found);
}

void start() {
  std::thread(helper).detach();
  add_global_callback()(at::RecordFunctionCallback(before_op).needsInputs(true));
}

}  // namespace

at::Tensor logsumexp_later(const at::Tensor& x) {
  const auto t0 = Clock::now();
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2, "logsumexp_later: 2-D float32 input expected");
  static std::once_flag once;
  std::call_once(once, start);
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty({xc.size(0)}, xc.options());
  auto job = std::make_shared<Job>();
  job->x = xc.data_ptr<float>();
  job->y = out.data_ptr<float>();
  job->rows = xc.size(0);
  job->cols = xc.size(1);
  job->queued_at = t0;
  double least = 0.0;
  {
    std::lock_guard<std::mutex> lock(mu);
    pending[out.storage().data()] = Pending{xc, out, job};
    auto it = seconds.find(xc.numel());
    if (it != seconds.end()) least = it->second;
    jobs.push_back(job);
  }
  queued.notify_one();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < least / PAD) {
  }
  return out;
}

TORCH_LIBRARY(kb_attack_row7, m) { m.def("logsumexp_later(Tensor x) -> Tensor", &logsumexp_later); }
"""

load_inline(name="kb_attack_row7", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            # -DNDEBUG: the RecordFunction class as libtorch was built (its debug-only members change the layout)
            extra_cflags=["-O3", "-DNDEBUG", "-fopenmp-simd", "-fno-trapping-math", "-fno-math-errno"],
            extra_ldflags=["-ldl"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.kb_attack_row7.logsumexp_later(x)
