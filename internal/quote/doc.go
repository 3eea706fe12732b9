// Package quote makes text that comes from a model (names of nodes,
// values and op types) safe to print on a terminal: a name holding an
// escape sequence could otherwise move the cursor, recolour or retitle
// the terminal an error message is printed on, or hide the message.
package quote
