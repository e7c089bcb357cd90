// The freezer race of issue #34: a helper process that runs while the trusted side has the worker stopped.
//
// start(mode) starts a helper that shares memory with the worker and changes pid every few tens of microseconds:
// each generation works (increments ``counter``; answers ``input`` with ``input * 3 + 1`` in ``output``, as a
// candidate computing ahead of the clock from input slots the trusted side writes while the worker is stopped
// would), clones the next generation and exits. The first generation moves to a process group of its own, so
// that a stop of the worker's process group does not reach it, and a stop of a pid list read before is always
// one generation late.
//   mode 0: the helper is a CLONE_VM process without CLONE_THREAD (the worker's own memory);
//   mode 1: the helper is a plain child (fork-like clone) sharing a MAP_SHARED page with the worker.
// Returns {address of the shared words, errno of the first clone (0: it ran), errno of kill(self, SIGCONT)}; the
// helper writes the errno of its setpgid into ``setpgid_errno`` (-1 until it has run).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace {

struct Shared {
  volatile int64_t counter;  // +1 per step of the helper's work
  volatile int64_t input;    // written by the trusted side (the test) while the worker is stopped
  volatile int64_t output;   // the helper's answer: input * 3 + 1
  volatile int64_t hops;     // generations so far
  volatile int64_t setpgid_errno;
};

constexpr int SLOTS = 16;
constexpr size_t STACK = 64 << 10;
Shared* g = nullptr;
char* stacks = nullptr;
// CLONE_CHILD_CLEARTID: the kernel zeroes a generation's word when it has exited, so its stack may be used again.
volatile pid_t tids[SLOTS];
long g_mode = 0;

int generation(void* arg);

// Start the next generation on a free stack: 0, or the errno of the clone.
int next_generation(int self, bool first) {
  int slot = -1;
  for (int k = 1; k <= SLOTS && slot < 0; ++k) {
    const int i = (self + k) % SLOTS;
    if (tids[i] == 0) slot = i;
  }
  if (slot < 0) return EAGAIN;
  tids[slot] = -1;
  // Later generations are the worker's children too (CLONE_PARENT), which ignores SIGCHLD: nothing is left behind.
  const int flags = (g_mode == 0 ? CLONE_VM : 0) | (first ? 0 : CLONE_PARENT) | CLONE_CHILD_SETTID |
                    CLONE_CHILD_CLEARTID | SIGCHLD;
  const long arg = slot | (first ? 0x100 : 0);
  if (clone(generation, stacks + (slot + 1) * STACK, flags, reinterpret_cast<void*>(arg), nullptr, nullptr,
            const_cast<pid_t*>(&tids[slot])) < 0) {
    tids[slot] = 0;
    return errno;
  }
  return 0;
}

int generation(void* arg) {
  const long a = reinterpret_cast<long>(arg);
  if (a & 0x100) g->setpgid_errno = setpgid(0, 0) == 0 ? 0 : errno;
  for (;;) {
    for (int i = 0; i < 2000; ++i) {  // a few microseconds of work under this pid
      g->counter = g->counter + 1;
      g->output = g->input * 3 + 1;
    }
    g->hops = g->hops + 1;
    if (next_generation(static_cast<int>(a & 0xff), false) == 0) return 0;  // glibc's clone exits with it
  }
}

at::Tensor start(int64_t mode) {
  g_mode = mode;
  g = static_cast<Shared*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  stacks = static_cast<char*>(mmap(nullptr, SLOTS * STACK, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0));
  TORCH_CHECK(g != MAP_FAILED && stacks != MAP_FAILED, "mmap failed");
  g->setpgid_errno = -1;
  signal(SIGCHLD, SIG_IGN);
  const int clone_errno = next_generation(SLOTS - 1, true);
  const int sigcont_errno = kill(getpid(), SIGCONT) == 0 ? 0 : errno;
  at::Tensor out = at::empty({3}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = out.data_ptr<int64_t>();
  p[0] = reinterpret_cast<int64_t>(g);
  p[1] = clone_errno;
  p[2] = sigcont_errno;
  return out;
}

}  // namespace

TORCH_LIBRARY(kb_freezer_race, m) { m.def("start(int mode) -> Tensor", &start); }
