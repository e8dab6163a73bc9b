// AtChanceLevel: whether a test evaluation says the model no longer tells
// classes apart. Both the evaluator (a warning in its log) and `gaptrain
// run` (a line in the job's summary) ask it, so a user whose job trained a
// dead model is told why the accuracy is ~1/K and what to change.
//
// Asynchronous SGD with a learning rate too high for its number of workers
// can kill a model within its first few hundred updates: all ReLUs dead,
// or outputs collapsed onto one class (docs/run.md, Examples). Such a model
// has the cross-entropy of a uniform guess, ln K, and about chance
// accuracy; an untrained model does too, so callers ask only after some
// updates.

#ifndef GAPTRAIN_SERVICES_LEARN_CHANCE_LEVEL_H_
#define GAPTRAIN_SERVICES_LEARN_CHANCE_LEVEL_H_

namespace gaptrain {

// True when `loss` (mean cross-entropy, nats) is within 2% of ln
// `num_classes` and `accuracy` (in [0, 1]) is at most twice 1/num_classes.
// False for num_classes < 2 and for non-finite inputs.
bool AtChanceLevel(double accuracy, double loss, int num_classes);

// One sentence for the user: what such a model means and which manifest
// field to change.
const char* ChanceLevelAdvice();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_CHANCE_LEVEL_H_
