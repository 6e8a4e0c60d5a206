//go:build linux

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// failOnce exits with code the first time it runs and 0 afterwards: the
// marker file in the pod's emptyDir survives the container's restarts.
func failOnce(marker string, code string) string {
	return `["sh", "-c", "if [ -e /data/` + marker + ` ]; then exit 0; fi; touch /data/` + marker + `; exit ` + code + `"]`
}

// TestIntegrationContainerRestartRules: a container's own restartPolicy and
// restart rules override the pod's (ContainerRestartRules, on by default):
//   - pod Never, container OnFailure failing once: restarted once, and the pod
//     ends Succeeded (upstream's "[sig-apps] Job containers restarted by
//     container restart policy should not trigger PodFailurePolicy");
//   - pod Always, container Never: not restarted after it exits non-zero, the
//     pod keeps Running;
//   - pod Always, container Never with a rule restarting it on exit code 42:
//     restarted after 42, not after its next exit 0.
func TestIntegrationContainerRestartRules(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("job.yaml", manifest("job", `  restartPolicy: Never
  containers:
  - name: job
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: OnFailure
    command: `+failOnce("job-ran", "1")+`
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    emptyDir: {}
`))
	n.writeManifest("svc.yaml", manifest("svc", `  restartPolicy: Always
  containers:
  - name: sleeper
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
  - name: once
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Never
    command: ["sh", "-c", "exit 3"]
  - name: rule
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Never
    restartPolicyRules:
    - action: Restart
      exitCodes: {operator: In, values: [42]}
    command: `+failOnce("rule-ran", "42")+`
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    emptyDir: {}
`))
	p := n.waitPod("job", 90*time.Second, "Succeeded after one restart", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded
	})
	cs := containerStatus(p, "job")
	if cs == nil || cs.RestartCount != 1 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 ||
		cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("job container %+v, want terminated with 0 after one restart from exit code 1", cs)
	}

	exitedFor := func(name string, code int32) func(p *v1.Pod) bool {
		return func(p *v1.Pod) bool {
			cs := containerStatus(p, name)
			return cs != nil && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == code
		}
	}
	n.waitPod("svc", 90*time.Second, "once exited 3, rule exited 0 after a restart", func(p *v1.Pod) bool {
		return exitedFor("once", 3)(p) && exitedFor("rule", 0)(p)
	})
	// Give a wrong restart time to show: the first restart has no back-off,
	// and the relist runs every second.
	time.Sleep(5 * time.Second)
	p = n.waitPod("svc", 10*time.Second, "still Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if cs := containerStatus(p, "once"); cs == nil || cs.RestartCount != 0 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 {
		t.Errorf("container once (restartPolicy Never) %+v, want terminated with 3 and never restarted", cs)
	}
	if cs := containerStatus(p, "rule"); cs == nil || cs.RestartCount != 1 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
		t.Errorf("container rule %+v, want restarted once (exit 42 matches its rule), then terminated with 0", cs)
	}
	if cs := containerStatus(p, "sleeper"); cs == nil || cs.State.Running == nil {
		t.Errorf("container sleeper %+v, want running", cs)
	}
}
