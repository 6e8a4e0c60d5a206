// Package network sets up and tears down pod networking for the dockershim
// with CNI: the loopback plugin plus the default network, which is the first
// *.conflist, *.conf or *.json file (in lexical order) of the configuration
// directory.
//
// It is the only package of the project that imports libcni
// (github.com/containernetworking/cni). Only internal/dockershim may import it.
//
// A Manager re-reads the configuration directory when it changes, passes the
// portMappings, bandwidth and dns capabilities to the plugins, serializes
// set-up and tear-down per sandbox, and tears a sandbox down from the
// configuration libcni cached at ADD time, so a changed or removed
// configuration directory or a vanished network namespace still releases
// every resource.
//
// Usage:
//
//	m, err := network.New(network.Options{
//		ConfDir:  "/etc/cni/net.d",
//		BinDirs:  []string{"/opt/cni/bin", "/usr/lib/cni"},
//		CacheDir: "/var/lib/cni/cache",
//		Logger:   logger,
//	})
//	if err != nil {
//		return err
//	}
//	if err := m.Status(); err != nil {
//		return fmt.Errorf("network not ready: %w", err)
//	}
//	res, err := m.SetUpPod(ctx, network.Pod{ID: id, Name: name, Namespace: ns, UID: uid, NetNS: netns})
//	...
//	err = m.TearDownPod(ctx, network.Pod{ID: id, Name: name, Namespace: ns, UID: uid})
package network
