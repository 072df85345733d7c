// ReplicaCheck: the ranks' copies of the network compared during training.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "parallel/train/callback.h"

namespace minidl::parallel {
class Communicator;
}

namespace minidl {

// Every `every` steps (global steps) the ranks check that their replicas of
// the network are still identical: each rank hashes the raw bytes of every
// parameter (64 bits each, in named_parameters() order) and the hashes are
// allgathered over parallel::world(). On a difference every rank throws the
// same minidl::Error naming the step, the first parameter that differs and the
// ranks whose copy differs from rank 0's, e.g.
//   ReplicaCheck: the replicas diverged by step 20 (epoch 1 step 20): parameter
//   fc1.weight [120, 400] differs from rank 0's on rank 1 (max |difference|
//   0.0123); 1 of 10 parameters differ. ...
// When they agree, rank 0 prints one line per check, e.g.
//   replicas agree at step 20 (epoch 1 step 20): 10 parameters identical on 2
//   ranks (max |difference| 0)
// Collective: every rank must run the same steps (Model::train does). Does
// nothing with one rank or before parallel::init(). every >= 1.
class ReplicaCheck : public Callback {
 public:
  explicit ReplicaCheck(int64_t every);
  void on_step_end(const StepEnd& s) override;
  int64_t checks() const { return checks_; }  // comparisons made so far

 private:
  int64_t every_;
  int64_t checks_ = 0;
};

namespace parallel {
// The comparison ReplicaCheck makes, for custom training loops: collective
// over `group`; throws as above, `when` ("step 20") going into the message.
// Returns the number of parameters compared (all identical). Prints nothing.
size_t check_replicas(const nn::Cell& network, Communicator& group, const std::string& when);
}  // namespace parallel

}  // namespace minidl
