// The image a TrainingJob's pods start with where their template names
// none (issue 39): chosen once, when the job's first pods are made, and
// recorded in the job's status.image, so that an operator upgraded (or
// restarted with another --image) while the job runs does not mix versions
// inside it. Every later pod (a preempted worker's replacement, a
// scale-up, a restarted master, the export pod) gets the recorded image. A
// container whose template names its own image keeps it.
//
// A user moves a job to another image with the job's annotation
// kImageAnnotation (`kubectl annotate tj NAME gaptrain.io/image=IMAGE
// --overwrite`): while it is set and not empty it is the job's image, and
// status.image follows it. Pods made from then on get it; running pods
// keep theirs (suspending and resuming the job makes every pod anew).
// Removing the annotation keeps the image last recorded.
//
// What callers may rely on: pure functions of the objects given, no I/O;
// the same job and pods always give the same image.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_RECORDED_IMAGE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_RECORDED_IMAGE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gaptrain {
namespace trainingjob {

// The TrainingJob annotation that names the job's image.
constexpr char kImageAnnotation[] = "gaptrain.io/image";

// The image the job asks for or has recorded: its annotation
// kImageAnnotation when not empty, else status.image; "" when neither.
std::string RecordedJobImage(const nlohmann::json& job);

// The image of pods made now where their template names none:
// RecordedJobImage(job); else, for a job recorded before status.image
// existed, the image of gaptrain's container in the job's own pods
// (`pods`: those it controls count, by replica type master, coordinator,
// evaluator, trainers, then by name; a pod whose template names an image
// tells nothing); else `operator_image`, the operator's own for new jobs.
std::string JobPodImage(const nlohmann::json& job, const std::vector<nlohmann::json>& pods,
                        const std::string& operator_image);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_RECORDED_IMAGE_H_
