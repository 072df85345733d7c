// minidl: the one header a user includes.
#pragma once
#include "framework/autograd.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "framework/tensor.h"
#include "framework/threads.h"
