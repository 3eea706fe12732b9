// Package planpb holds the protobuf schema of tsplit's native execution
// plan (plan.proto) and its generated Go types. Package native lowers a
// planned step to a Plan, writes and reads .tsplan files and checks
// them; docs/native-plan.md describes the format.
package planpb
