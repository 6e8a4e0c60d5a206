package e2e

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkActiveDeadline (issue 16 item 5): the pod of a Job whose template sets
// activeDeadlineSeconds: 3 runs, then the kubelet fails it with upstream's
// DeadlineExceeded reason and message, stops its container and records the
// Normal DeadlineExceeded event.
func checkActiveDeadline(n *clusterNode) {
	n.t.Helper()
	n.applyYAML(fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: deadline, namespace: @NS@}
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: %s
      restartPolicy: Never
      activeDeadlineSeconds: 3
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: @IMAGE@
        imagePullPolicy: Never
        command: ["sleep", "3600"]
`, n.name))
	var pod *v1.Pod
	n.poll(60*time.Second, "the Job's pod failed with DeadlineExceeded", func() (bool, string) {
		pods, err := n.c.Client.CoreV1().Pods(n.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=deadline"})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Sprint("no pod yet ", err)
		}
		pod = &pods.Items[0]
		return pod.Status.Phase == v1.PodFailed, fmt.Sprintf("phase %s reason %q", pod.Status.Phase, pod.Status.Reason)
	})
	if pod.Status.Reason != "DeadlineExceeded" || pod.Status.Message != "Pod was active on the node longer than the specified deadline" {
		n.t.Errorf("pod past its deadline: reason %q message %q, want DeadlineExceeded / upstream's message", pod.Status.Reason, pod.Status.Message)
	}
	if pod.Status.StartTime == nil {
		n.t.Fatal("the failed pod has no start time")
	}
	// It ran (the deadline counts from the start time), and no longer does.
	n.poll(30*time.Second, "the deadline pod's container terminated", func() (bool, string) {
		p, err := n.apiPod(pod.Name)
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprint(err)
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Terminated != nil, fmt.Sprintf("%+v", cs.State)
	})
	n.poll(30*time.Second, "the DeadlineExceeded event", func() (bool, string) {
		evs, err := n.c.Client.CoreV1().Events(n.ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(pod.UID) + ",reason=DeadlineExceeded"})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint("no event ", err)
		}
		e := evs.Items[0]
		return e.Type == v1.EventTypeNormal && e.Message == pod.Status.Message, fmt.Sprintf("%s %q", e.Type, e.Message)
	})
}
