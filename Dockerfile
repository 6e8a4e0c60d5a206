# The kubelet (with the dockershim built in) as a container image.
# Build: docker build -t kubelet-dockershim/kubelet .  (needs the Go module proxy)
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
