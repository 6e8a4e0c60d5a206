// Package podmanager is the kubelet's pod manager: the pods the sources want,
// merged per source (a SET diffed against the source's last one) and indexed by
// UID and by name, the set the kubelet admitted, the API's mirror pods of
// static pods, and ActivePods, the admitted pods that are not done.
//
// It is built first, before any manager that needs the node's pods: those get
// it (its ActivePods) through their Options; the kubelet applies the sources'
// updates to it and installs its test of a pod being active (SetActive).
//
// It imports kubelet/container and kubelet/status only.
package podmanager
