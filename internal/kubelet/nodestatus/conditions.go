package nodestatus

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Ready condition reasons and messages, as upstream.
const (
	reasonKubeletReady    = "KubeletReady"
	reasonKubeletNotReady = "KubeletNotReady"
	messageKubeletReady   = "kubelet is posting ready status"
)

// pressureKind describes one pressure condition: its reasons, messages and the
// events recorded when it changes, as upstream.
type pressureKind struct {
	condition                             v1.NodeConditionType
	trueReason, trueMessage, trueEvent    string
	falseReason, falseMessage, falseEvent string
}

func memoryPressureKind() pressureKind {
	return pressureKind{
		condition:    v1.NodeMemoryPressure,
		trueReason:   "KubeletHasInsufficientMemory",
		trueMessage:  "kubelet has insufficient memory available",
		trueEvent:    "NodeHasInsufficientMemory",
		falseReason:  "KubeletHasSufficientMemory",
		falseMessage: "kubelet has sufficient memory available",
		falseEvent:   "NodeHasSufficientMemory",
	}
}

func diskPressureKind() pressureKind {
	return pressureKind{
		condition:    v1.NodeDiskPressure,
		trueReason:   "KubeletHasDiskPressure",
		trueMessage:  "kubelet has disk pressure",
		trueEvent:    "NodeHasDiskPressure",
		falseReason:  "KubeletHasNoDiskPressure",
		falseMessage: "kubelet has no disk pressure",
		falseEvent:   "NodeHasNoDiskPressure",
	}
}

func pidPressureKind() pressureKind {
	return pressureKind{
		condition:    v1.NodePIDPressure,
		trueReason:   "KubeletHasInsufficientPID",
		trueMessage:  "kubelet has insufficient PID available",
		trueEvent:    "NodeHasInsufficientPID",
		falseReason:  "KubeletHasSufficientPID",
		falseMessage: "kubelet has sufficient PID available",
		falseEvent:   "NodeHasSufficientPID",
	}
}

// setPressureCondition updates (or appends) the condition of kind k: the
// heartbeat always moves to now; status, reason, message and the transition time
// change only when the pressure flips (a new condition starts Unknown, so it
// always flips), and then the matching event is recorded.
func (c *Controller) setPressureCondition(node *v1.Node, now metav1.Time, k pressureKind, underPressure bool) {
	cond := findCondition(node.Status.Conditions, k.condition)
	if cond == nil {
		node.Status.Conditions = append(node.Status.Conditions,
			v1.NodeCondition{Type: k.condition, Status: v1.ConditionUnknown})
		cond = &node.Status.Conditions[len(node.Status.Conditions)-1]
	}
	cond.LastHeartbeatTime = now
	want, reason, message, event := v1.ConditionFalse, k.falseReason, k.falseMessage, k.falseEvent
	if underPressure {
		want, reason, message, event = v1.ConditionTrue, k.trueReason, k.trueMessage, k.trueEvent
	}
	if cond.Status == want {
		return
	}
	cond.Status, cond.Reason, cond.Message, cond.LastTransitionTime = want, reason, message, now
	c.recordNodeStatusEvent(v1.EventTypeNormal, event)
}

// setReadyCondition updates (or appends) the Ready condition: True with reason
// KubeletReady when Readiness returns nil and the required capacities are
// known; else False with reason KubeletNotReady and the errors as message. The
// transition time changes only when the status flips; NodeReady/NodeNotReady
// events are recorded then.
func (c *Controller) setReadyCondition(node *v1.Node, now metav1.Time) {
	next := v1.NodeCondition{
		Type:              v1.NodeReady,
		Status:            v1.ConditionTrue,
		Reason:            reasonKubeletReady,
		Message:           messageKubeletReady,
		LastHeartbeatTime: now,
	}
	if err := utilerrors.NewAggregate([]error{c.opts.Readiness(), missingCapacity(node)}); err != nil {
		next.Status, next.Reason, next.Message = v1.ConditionFalse, reasonKubeletNotReady, err.Error()
	}
	cond := findCondition(node.Status.Conditions, v1.NodeReady)
	if cond == nil {
		next.LastTransitionTime = now
		node.Status.Conditions = append(node.Status.Conditions, next)
		return
	}
	flipped := cond.Status != next.Status
	if flipped {
		next.LastTransitionTime = now
	} else {
		next.LastTransitionTime = cond.LastTransitionTime
	}
	*cond = next
	if !flipped {
		return
	}
	if next.Status == v1.ConditionTrue {
		c.recordNodeStatusEvent(v1.EventTypeNormal, "NodeReady")
		return
	}
	c.recordNodeStatusEvent(v1.EventTypeNormal, "NodeNotReady")
	c.log.Info("Node became not ready", zap.String("node", node.Name), zap.String("message", next.Message))
}

// missingCapacity names the required capacities the node lacks, or nil.
func missingCapacity(node *v1.Node) error {
	var missing []string
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage} {
		if _, ok := node.Status.Capacity[r]; !ok {
			missing = append(missing, string(r))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", "))
}
