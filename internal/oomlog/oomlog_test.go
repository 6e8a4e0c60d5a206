package oomlog

import (
	"strconv"
	"strings"
	"testing"
)

const (
	idA = "cc8b1d3bd63d1ab1dbbec46b0df257565cabc0af72a01ff44258ec019606abc7"
	idB = "22e85ee948655927fd0d0580966520619216fc0b510e30d9c7e42c891969ad1d"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		desc   string
		record string
		want   Kill
		ok     bool
	}{
		{
			desc:   "4.19+ line, cgroupfs driver (as logged by Linux 6.1 for a Docker container)",
			record: "3,6512,49296076846,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=" + idA + ",mems_allowed=0,oom_memcg=/docker/" + idA + ",task_memcg=/docker/" + idA + ",task=tail,pid=16508,uid=0\n",
			want:   Kill{Seq: 6512, TaskMemcg: "/docker/" + idA, OOMMemcg: "/docker/" + idA, Task: "tail", PID: 16508},
			ok:     true,
		},
		{
			desc: "systemd driver, the pod's slice hit its limit, a task name with a comma, continuation lines",
			record: "6,7,8,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=0-1,cpuset=/,mems_allowed=0-1,oom_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice," +
				"task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/docker-" + idB + ".scope,task=a,b,pid=42,uid=1000\n SUBSYSTEM=memory\n",
			want: Kill{Seq: 7, TaskMemcg: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/docker-" + idB + ".scope",
				OOMMemcg: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice", Task: "a,b", PID: 42},
			ok: true,
		},
		{
			desc:   "older kernels' line",
			record: "3,99,1,-;Task in /kubepods/burstable/pod1/" + idA + " killed as a result of limit of /kubepods/burstable/pod1\n",
			want:   Kill{Seq: 99, TaskMemcg: "/kubepods/burstable/pod1/" + idA, OOMMemcg: "/kubepods/burstable/pod1"},
			ok:     true,
		},
		{
			desc:   "a system-wide OOM (global_oom in place of oom_memcg)",
			record: "3,120,1,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-0.slice,task=stress,pid=4321,uid=0\n",
			want:   Kill{Seq: 120, TaskMemcg: "/user.slice/user-0.slice", Global: true, Task: "stress", PID: 4321},
			ok:     true,
		},
		{desc: "a line a process wrote into /dev/kmsg (facility user, 14) is not the kernel's",
			record: "14,121,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/docker/" + idA + ",task_memcg=/docker/" + idA + ",task=x,pid=1,uid=0\n"},
		{desc: "nor one with a facility the kernel never uses (daemon, 3)",
			record: "27,122,1,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=x,pid=1,uid=0\n"},
		{desc: "the kill summary line is not parsed (the oom-kill line names the cgroup)",
			record: "3,100,1,-;Memory cgroup out of memory: Killed process 16508 (tail) total-vm:17696kB, anon-rss:15872kB\n"},
		{desc: "another message", record: "6,101,1,-;eth0: link up\n"},
		{desc: "no header", record: "oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/x,task=t,pid=1,uid=0"},
		{desc: "no task_memcg", record: "3,1,1,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null)\n"},
		{desc: "a continuation line naming a cgroup is not the message", record: "6,1,1,-;hello\n Task in /docker/" + idA + " killed as a result of limit of /\n"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := Parse([]byte(tc.record))
			if ok != tc.ok || got != tc.want {
				t.Errorf("Parse = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestContainerID(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/docker/" + idA: idA,
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/docker-" + idA + ".scope": idA,
		"/docker/5a6521/kubepods/besteffort/pod1/" + idB:                                                    idB,
		idA:                                   idA,
		"/":                                   "",
		"/system.slice/docker.service":        "",
		"/docker/" + strings.ToUpper(idA):     "",
		"/docker/" + idA[:63]:                 "",
		"/x/cri-containerd-" + idA + ".scope": "",
		"/x/docker-" + idA:                    "",
	} {
		if got := ContainerID(path); got != want {
			t.Errorf("ContainerID(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestKilledSetForgetsTheOldestFirst(t *testing.T) {
	t.Parallel()
	var s killedSet
	id := func(i int) string { return strconv.Itoa(i) }
	for i := 0; i < maxRemembered+10; i++ {
		s.add(id(i))
		s.add(id(i)) // again: no second slot
	}
	if len(s.ids) != maxRemembered {
		t.Fatalf("remembered %d, want %d", len(s.ids), maxRemembered)
	}
	for i := 0; i < 10; i++ {
		if s.has(id(i)) {
			t.Errorf("%d is still remembered; the oldest go first", i)
		}
	}
	for _, i := range []int{10, maxRemembered, maxRemembered + 9} {
		if !s.has(id(i)) {
			t.Errorf("%d was forgotten", i)
		}
	}
}

func TestKillContainerIsUpstreamsName(t *testing.T) {
	t.Parallel()
	if got := (Kill{TaskMemcg: "/kubepods/pod1/" + idA, OOMMemcg: "/kubepods/pod1"}).Container(); got != "/kubepods/pod1/"+idA {
		t.Errorf("a memory cgroup kill is named %q, want its task's cgroup", got)
	}
	if got := (Kill{TaskMemcg: "/user.slice", Global: true}).Container(); got != "/" {
		t.Errorf("a system-wide kill is named %q, want the root \"/\" (cAdvisor's oomparser does not read its line)", got)
	}
}
