// Package filecheck checks a text — a pass's output — against
// expectations written as comments in a test file, in the manner of
// LLVM's FileCheck, so a test states the few lines it is about instead
// of a whole golden output:
//
//	# RUN: schedule,plan budget=200000
//	# CHECK: = ai.tsplit:SwapOut [[X:%[0-9]+]]
//	# CHECK-NEXT: Relu
//	# CHECK-NOT: SwapIn [[X]]
//	# CHECK-COUNT-2: = Slice {{.*}}[host]
//	# CHECK-SAME-AS-INPUT
//	# CHECK-ERROR: uses {{".*"}} before it is defined
//
// A directive is a comment line whose text starts with one of the words
// above and a colon (CHECK-SAME-AS-INPUT takes no pattern). Patterns
// are literal text except for {{regex}} blocks, [[NAME:regex]], which
// matches regex and binds NAME to what it matched, and [[NAME]], which
// matches the text bound before; a run of spaces matches any run of
// spaces and tabs. Matching goes line by line:
//
//   - CHECK finds the first line at or after the line following the
//     previous match that contains the pattern;
//   - CHECK-NEXT must match the line right after the previous match;
//   - CHECK-COUNT-n is n CHECKs of the same pattern;
//   - CHECK-NOT must match no line between the matches of the
//     directives around it (up to the end after the last one);
//   - each CHECK-ERROR must match a line of the error the RUN line
//     ends in; without one, the RUN line must succeed.
//
// RUN and CHECK-SAME-AS-INPUT are read here and acted on by the test
// runner: the first names what produces the output, the second asks
// that the output equal the input. Every error names the test file and
// the line of the directive.
package filecheck
