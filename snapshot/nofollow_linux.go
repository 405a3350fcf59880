package snapshot

import "syscall"

const noFollow = syscall.O_NOFOLLOW
