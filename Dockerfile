# Two images of the kubelet (with the dockershim built in):
#
#   node     a node of scripts/cluster.sh: systemd as PID 1 with its own
#            dockerd (kubelet-dockershim/node:bookworm, scripts/node-image.sh:
#            a debootstrap'd Debian 12, since no registry may be reachable),
#            bin/kubelet built on the host (make), the project's systemd units
#            and images/cluster/rootfs (kubelet config, kube-proxy, pod network).
#            It comes first: the classic builder builds every stage up to its
#            target, and needs no other base for this one.
#              make && DOCKER_BUILDKIT=0 docker build --target node -t kubelet-dockershim/cluster-node:dev .
#   (last)   the kubelet alone on debian:bookworm-slim, built from source in
#            golang:1.26-bookworm (needs a registry and the Go module proxy).
#              docker build -t kubelet-dockershim/kubelet .
FROM kubelet-dockershim/node:bookworm AS node
COPY images/cluster/rootfs/ /
COPY systemd/kubelet.service /etc/systemd/system/kubelet.service
COPY systemd/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
COPY bin/kubelet /usr/bin/kubelet
# Debian's CNI plugins are in /usr/lib/cni; the kubelet's default is /opt/cni/bin.
RUN set -eu; \
	mkdir -p /etc/kubernetes/manifests /etc/cni/net.d /opt/cni; \
	ln -s /usr/lib/cni /opt/cni/bin; \
	systemctl enable kubelet.service kube-proxy.service kds-podnet.service

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/kubelet .

FROM debian:bookworm-slim
# CNI plugins run as children of the kubelet and call iptables; ca-certificates
# for the API server and registries.
RUN apt-get update \
	&& apt-get install -y --no-install-recommends ca-certificates iptables \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=build /out/kubelet /usr/bin/kubelet
ENTRYPOINT ["/usr/bin/kubelet"]
