//go:build unix

package compiler

import "syscall"

// openNoBlock makes an open of a FIFO return at once instead of waiting
// for a writer (the mode check after the open then refuses it).
const openNoBlock = syscall.O_NONBLOCK
