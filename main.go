// Command kubelet is a Kubernetes node agent with the dockershim built in.
package main

import (
	"os"

	"github.com/kubelet-dockershim/kubelet/internal/app"
)

func main() { os.Exit(app.Main()) }
