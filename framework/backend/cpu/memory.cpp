// The CPU allocator: 64-byte aligned blocks, freed ones of 4 KiB and up kept
// for reuse, and the byte counts memory_stats() reports.
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
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    return p;
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
