// The CPU allocator: 64-byte aligned blocks, freed ones of 4 KiB and up kept
// for reuse, and the byte counts memory_stats() reports.
#include <sys/mman.h>

#include <cstdlib>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "framework/backend/byte_count.h"
#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {
namespace {

// Keeps freed blocks of 4 KiB and up for reuse by the next allocation of the
// same size: a training step allocates the same shapes every step, and fresh
// pages from the OS cost a page fault each. Bounded: a block that does not fit
// pushes out the longest-kept ones (so the cache follows the sizes in use
// now, not the first ones to fill it). Never destroyed, so tensors that
// outlive static destruction can still return their blocks.
// A new block, 64-byte aligned; from 2 MiB up aligned to 2 MiB and marked
// for transparent huge pages (where the kernel's mode is madvise, as on
// Debian), so that a pass over a large tensor takes a TLB miss per 2 MiB
// rather than per 4 KiB: relu, mul and a bias add on [1024, 3072] forward
// and back ran in 0.6-0.7 of the time (bench/README.md).
void* fresh_block(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const bool huge = bytes >= kHuge;
  const size_t align = huge ? kHuge : 64, rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: its failure changes nothing
  return p;
}

class BlockCache {
 public:
  static BlockCache& get() {
    static BlockCache* cache = new BlockCache;
    return *cache;
  }
  void* allocate(size_t bytes) {
    if (bytes >= kMinBlock) {
      std::lock_guard lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {  // the latest freed of this size
        void* p = it->second.back()->second;
        order_.erase(it->second.back());
        it->second.pop_back();
        cached_ -= bytes;
        return p;
      }
    }
    return fresh_block(bytes);
  }
  void release(void* p, size_t bytes) {
    if (bytes >= kMinBlock && bytes <= kMaxCached) {
      std::lock_guard lock(mutex_);
      while (cached_ + bytes > kMaxCached) drop_oldest();
      order_.emplace_back(bytes, p);
      free_[bytes].push_back(std::prev(order_.end()));
      cached_ += bytes;
      return;
    }
    std::free(p);
  }

 private:
  using Order = std::list<std::pair<size_t, void*>>;  // cached blocks, the longest kept first
  void drop_oldest() {  // the oldest block is the first of its size's list
    const auto [bytes, p] = order_.front();
    std::vector<Order::iterator>& same = free_[bytes];
    same.erase(same.begin());
    order_.pop_front();
    cached_ -= bytes;
    std::free(p);
  }
  static constexpr size_t kMinBlock = 4096, kMaxCached = size_t(256) << 20;
  std::mutex mutex_;
  Order order_;
  std::unordered_map<size_t, std::vector<Order::iterator>> free_;  // per size, oldest first
  size_t cached_ = 0;
};

size_t block_size(size_t n) { return n ? (n + 63) / 64 * 64 : 64; }

ByteCount counted;  // current and peak bytes of live storages

}  // namespace

void* allocate(size_t bytes) {
  void* p = BlockCache::get().allocate(block_size(bytes));
  counted.add(static_cast<int64_t>(bytes));
  return p;
}
void deallocate(void* p, size_t bytes) {
  BlockCache::get().release(p, block_size(bytes));
  counted.add(-static_cast<int64_t>(bytes));
}
int64_t current_bytes() { return counted.current(); }
int64_t peak_bytes() { return counted.peak(); }
void reset_peak() { counted.reset_peak(); }

Scratch::Scratch(int64_t floats)
    : bytes_(static_cast<size_t>(floats) * sizeof(float)),
      data_(static_cast<float*>(allocate(bytes_))) {}
Scratch::~Scratch() { deallocate(data_, bytes_); }

}  // namespace minidl::cpu
