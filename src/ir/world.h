// The process's place in a distributed job (braze/distributed.h): its rank and the
// number of ranks, set once by InitDistributed (device/communicator.cc) and read by the
// collective builders, which record them in the graph. In ir/ because the builders
// (frontend/) and the communicator (device/) sit in layers that cannot see each other.
#ifndef BRAZE_IR_WORLD_H_
#define BRAZE_IR_WORLD_H_

namespace braze {

struct World {
  int rank = 0;
  int size = 1;
};

World CurrentWorld();
void SetCurrentWorld(World world);

}  // namespace braze

#endif  // BRAZE_IR_WORLD_H_
