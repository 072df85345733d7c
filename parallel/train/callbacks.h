// Training callbacks (MindSpore's names and output formats), one concern a
// file under parallel/train/:
//   callback.h       the events, the Callback base, CallbackList (drives
//                    callbacks from Model::train or a hand-written loop)
//   progress.h       LossMonitor, TimeMonitor, ProgressBar (printing)
//   checkpoint.h     ModelCheckpoint
//   history.h        HistoryWriter (CSV and SVG of the training curve)
//   svg_plot.h       write_svg_plot, the figure HistoryWriter draws
//   replica_check.h  ReplicaCheck, parallel::check_replicas
//
// Pass callbacks to Model::train by value in a braced list,
// `model.train(10, ds, {LossMonitor(100), ProgressBar()})`, or as
// std::shared_ptr when you want to read one afterwards. In data-parallel
// training the printing callbacks print on rank 0 only; the loss they see is
// the mean over ranks.
#pragma once
#include "parallel/train/callback.h"
#include "parallel/train/checkpoint.h"
#include "parallel/train/history.h"
#include "parallel/train/progress.h"
#include "parallel/train/replica_check.h"
#include "parallel/train/svg_plot.h"
