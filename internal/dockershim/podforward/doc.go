// Package podforward keeps the host's FORWARD chain from dropping pod
// traffic.
//
// Docker's daemon sets the policy of the filter table's FORWARD chain to DROP
// when it turns IP forwarding on, then accepts the traffic of its own bridges
// only. Traffic between the pods of a CNI bridge network crosses that chain
// too (br_netfilter, whose bridge-nf-call-iptables Docker also sets, passes
// bridged frames through iptables), so on a stock Docker host a pod cannot
// reach another pod of its node, its node's host ports, or a Service backed by
// a pod. Rules accepts the traffic from and to the subnets of the pod network
// in a chain of its own, DOCKERSHIM-FORWARD, appended to FORWARD: after every
// rule that was there (Docker's DOCKER-USER, the chains of kube-proxy and of
// a network policy engine keep deciding first), before the policy.
//
// Rules are only ever added, never removed: pods keep running while the
// kubelet is stopped, and the rules of a subnet no pod uses any more accept
// nothing. Several instances on one host (tests, a shim beside a kubelet)
// share the chain without undoing each other's rules. Run checks every minute
// that the rules are still in place and puts back what a firewall reload
// flushed.
//
// Only internal/dockershim imports it.
//
// Usage:
//
//	fw := podforward.New(podforward.Options{Logger: logger})
//	go fw.Run(ctx, network.CachedSubnets) // the subnets pods already use
//	...
//	res, err := network.SetUpPod(ctx, pod)
//	if err == nil {
//		err = fw.Allow(ctx, res.Subnets) // no iptables call for a known subnet
//	}
package podforward
