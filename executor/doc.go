// Package executor runs an IR graph in its op order on a Device: one
// pool of device memory of a fixed size, host buffers for swapped
// tensors, and three streams — compute, device→host and host→device —
// each a goroutine that runs its tasks in issue order, synchronised by
// events (TSPLIT §V-D). A swap-out runs on the D2H stream while later
// compute proceeds; a swap-in is issued at its trigger position and its
// consumers wait for its event (Capuchin's decoupled swapping).
//
// Memory follows the one memory model (package memory): the executor
// replays the model's allocation and free events, placing each tensor
// either at a fixed offset given by a plan or with the best-fit
// allocator. A tensor is freed only after every task that touches it has
// completed, so the sequence — and therefore the placement and the
// measured peak — is deterministic even though the streams overlap.
//
// The same executor drives the CPU reference device (executor/cpu) and
// the CUDA device (backend/cuda); only the Device differs.
package executor
