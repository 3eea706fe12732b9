// Package exit is how a tsplit command ends: the exit statuses the
// README documents (1 bad input or an infeasible budget, 2 a wrong
// command line, 3 an internal error, 128+n a signal), the report of an
// internal error (a recovered panic: what happened, where, the command
// that reproduces it and a request to file a bug), and the context that
// SIGINT and SIGTERM cancel, so that a command stops between steps and
// its writes in progress remove their temporary files before it exits.
package exit
