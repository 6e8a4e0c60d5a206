// Package credentialprovider answers which registry credentials the kubelet
// sends with an image pull, as upstream's pkg/credentialprovider and
// pkg/credentialprovider/plugin do:
//
//   - NewDockerConfigKeyring reads the node's Docker config files
//     (.docker/config.json, then the legacy .dockercfg) from the kubelet root
//     directory, the working directory, $HOME and /, and keeps what it found
//     for five minutes.
//   - NewPlugins loads a CredentialProviderConfig (a file or a directory of
//     files) and runs the matching exec plugins of the bin dir, speaking
//     credentialprovider.kubelet.k8s.io (v1alpha1, v1beta1, v1) on stdin and
//     stdout and caching answers per image, registry or globally. A provider
//     with tokenAttributes is sent the pulling pod's service account token
//     (LookupForPod; the API side through UseServiceAccounts) and keeps its
//     answers per service account, or per token.
//   - UnionKeyring joins keyrings, in order.
//
// Within one keyring the credentials of the most specific registry entry come
// first (registry.example.com/team before registry.example.com); hosts may
// hold globs (*.example.com), ports must be equal and entry paths are
// prefixes of the image path.
//
// The kubelet side (kuberuntime's image puller, app) may import it; it
// imports nothing from this module.
//
// Usage:
//
//	plugins, err := credentialprovider.NewPlugins(cfgPath, binDir,
//		credentialprovider.WithLogger(logger))
//	if err != nil {
//		return err
//	}
//	keyring := credentialprovider.UnionKeyring{
//		credentialprovider.NewDockerConfigKeyring(rootDir, logger),
//		plugins,
//	}
//	creds, _ := keyring.Lookup("registry.example.com/team/app")
//	for _, c := range creds {
//		pullWith(c.CRI()) // try each until one works
//	}
package credentialprovider
