package containerlog

import "syscall"

// NoFollow makes an open fail on a symbolic link at the log path, so that a
// link planted there cannot redirect the shim's writes (or truncation) to a
// file of the link's choosing.
const NoFollow = syscall.O_NOFOLLOW
