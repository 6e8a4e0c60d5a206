// Package oomlog reads the kernel's own record of OOM kills (/dev/kmsg).
//
// Both halves use it. The dockershim asks it, by Docker container ID, whether
// the kernel killed one of a container's tasks: Docker reports a container
// OOMKilled only when containerd relays the cgroup's OOM notification, and
// containerd's runc shim registers for that notification after the
// container's process has started, so a container that runs out of memory
// within its first milliseconds is killed without Docker ever hearing of it
// and exits "Error" with code 137. The kubelet follows every kill, as
// upstream's OOM watcher does through cAdvisor's oomparser: a SystemOOM event
// for each system-wide kill, and the per-cgroup count behind
// container_oom_events_total.
//
// Only kernel records count (facility 0): a line a process writes into
// /dev/kmsg is never taken for a kill.
//
// A shared leaf: it imports nothing of this module.
package oomlog

import (
	"bytes"
	"strconv"
	"strings"
)

// Kill is one OOM kill the kernel logged.
type Kill struct {
	// Seq is the record's sequence number in the kernel log.
	Seq uint64
	// TaskMemcg is the memory cgroup of the killed task, as the kernel names
	// it (from the root of its cgroup namespace).
	TaskMemcg string
	// OOMMemcg is the memory cgroup whose limit was hit; "" when Global.
	OOMMemcg string
	// Global is a system-wide OOM (no memory cgroup's limit: the machine
	// ran out of memory).
	Global bool
	// Task is the killed task's command name; PID its process ID in the
	// initial namespace (0 when the line does not give them).
	Task string
	PID  int
}

// Container is the name upstream's OOM watcher gives the kill (cAdvisor's
// oomparser): the killed task's memory cgroup, or the root "/" for a
// system-wide OOM, whose line that parser does not read.
func (k Kill) Container() string {
	if k.Global {
		return "/"
	}
	return k.TaskMemcg
}

// Parse reads one /dev/kmsg record ("prio,seq,usec,flags[,...];message",
// then optional continuation lines) and returns the kill it logs, if any.
// Two formats name the victim's cgroup: the single "oom-kill:" line of
// kernels 4.19 and later (memory cgroup and system-wide kills), and the
// "Task in X killed as a result of limit of Y" line of older ones (memory
// cgroup kills only). Records not from the kernel itself are ignored.
func Parse(record []byte) (Kill, bool) {
	semi := bytes.IndexByte(record, ';')
	if semi < 0 {
		return Kill{}, false
	}
	header, msg := record[:semi], record[semi+1:]
	prio, _, _ := bytes.Cut(header, []byte(","))
	if p, err := strconv.Atoi(string(prio)); err != nil || p>>3 != 0 {
		return Kill{}, false // not facility 0 (kern): written by a process
	}
	if nl := bytes.IndexByte(msg, '\n'); nl >= 0 {
		msg = msg[:nl]
	}
	var k Kill
	var ok bool
	switch {
	case bytes.HasPrefix(msg, []byte("oom-kill:")):
		k, ok = parseOOMKillLine(string(msg))
	case bytes.HasPrefix(msg, []byte("Task in ")):
		k, ok = parseTaskInLine(string(msg))
	}
	if !ok {
		return Kill{}, false
	}
	fields := bytes.SplitN(header, []byte(","), 3)
	if len(fields) >= 2 {
		k.Seq, _ = strconv.ParseUint(string(fields[1]), 10, 64)
	}
	return k, true
}

// parseOOMKillLine reads "oom-kill:constraint=…,nodemask=…,cpuset=…,
// mems_allowed=…,oom_memcg=X,task_memcg=Y,task=comm,pid=N,uid=N", where a
// system-wide OOM has ",global_oom" in place of ",oom_memcg=X". The values
// before task_memcg= may hold commas of their own (a nodemask, a cpuset's
// name), so each field is found by its key, from the right where a task's
// name might hold one.
func parseOOMKillLine(msg string) (Kill, bool) {
	const taskMemcgKey, taskKey, pidKey, oomMemcgKey, globalKey = ",task_memcg=", ",task=", ",pid=", ",oom_memcg=", ",global_oom"
	i := strings.Index(msg, taskMemcgKey)
	if i < 0 {
		return Kill{}, false
	}
	rest := msg[i+len(taskMemcgKey):]
	j := strings.Index(rest, taskKey)
	if j < 0 {
		return Kill{}, false
	}
	k := Kill{TaskMemcg: rest[:j]}
	task := rest[j+len(taskKey):]
	if p := strings.LastIndex(task, pidKey); p >= 0 {
		pid := task[p+len(pidKey):]
		if c := strings.IndexByte(pid, ','); c >= 0 {
			pid = pid[:c]
		}
		k.PID, _ = strconv.Atoi(pid)
		task = task[:p]
	}
	k.Task = task
	if o := strings.Index(msg[:i], oomMemcgKey); o >= 0 {
		k.OOMMemcg = msg[o+len(oomMemcgKey) : i]
	} else if strings.HasSuffix(msg[:i], globalKey) {
		k.Global = true
	}
	return k, k.TaskMemcg != ""
}

// parseTaskInLine reads "Task in X killed as a result of limit of Y".
func parseTaskInLine(msg string) (Kill, bool) {
	const prefix, middle = "Task in ", " killed as a result of limit of "
	rest := strings.TrimPrefix(msg, prefix)
	i := strings.Index(rest, middle)
	if i <= 0 {
		return Kill{}, false
	}
	return Kill{TaskMemcg: rest[:i], OOMMemcg: rest[i+len(middle):]}, true
}

// ContainerID is the Docker container ID a memory cgroup path belongs to: its
// last element is the ID itself (the cgroupfs driver, below any parent) or
// docker-<ID>.scope (the systemd driver). Anything else gives "".
func ContainerID(cgroupPath string) string {
	base := cgroupPath[strings.LastIndexByte(cgroupPath, '/')+1:]
	if s, ok := strings.CutPrefix(base, "docker-"); ok {
		if id, ok := strings.CutSuffix(s, ".scope"); ok {
			base = id
		}
	}
	if len(base) != 64 {
		return ""
	}
	for i := 0; i < len(base); i++ {
		if c := base[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return base
}

// maxRemembered bounds how many killed containers are remembered; the oldest
// go first. A container's status is read within moments of its exit, so only
// the recent ones matter.
const maxRemembered = 4096

// killedSet remembers the containers the kernel killed a task of, oldest
// first out once full. Not safe for concurrent use.
type killedSet struct {
	ids   map[string]struct{}
	order []string // ring of remembered IDs, next slot to reuse at next
	next  int
}

func (s *killedSet) add(id string) {
	if s.ids == nil {
		s.ids = map[string]struct{}{}
	}
	if _, ok := s.ids[id]; ok {
		return
	}
	if len(s.order) < maxRemembered {
		s.order = append(s.order, id)
	} else {
		delete(s.ids, s.order[s.next])
		s.order[s.next] = id
		s.next = (s.next + 1) % maxRemembered
	}
	s.ids[id] = struct{}{}
}

func (s *killedSet) has(id string) bool {
	_, ok := s.ids[id]
	return ok
}
