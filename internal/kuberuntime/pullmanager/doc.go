// Package pullmanager keeps the kubelet's records of image pulls, as upstream's
// KubeletEnsureSecretPulledImages does: an ImagePullIntent is written before a
// pull and removed after it, an ImagePulledRecord names the credentials each
// image was pulled with, and MustAttemptImagePull decides whether a pod may use
// an image already on the node without pulling it with its own credentials.
//
// The records live under <root-dir>/image_manager/{pulling,pulled} in
// upstream's on-disk format (kubelet.config.k8s.io/v1beta1, v1alpha1 migrated),
// so a node switched from upstream's kubelet keeps them, and back.
//
// Only the runtime manager (internal/kuberuntime) and the composition root
// import this package; it imports nothing of this module.
package pullmanager
