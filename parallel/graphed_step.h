// Moved to parallel/train/ (the training driver); kept for tests/framework/test_graph.cpp.
#pragma once
#include "parallel/train/graphed_step.h"
