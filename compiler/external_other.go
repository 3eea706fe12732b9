//go:build !unix

package compiler

// openNoBlock is 0 where the platform has no O_NONBLOCK: the mode check
// before the open is the only guard against non-regular files there.
const openNoBlock = 0
