package planpb

// Regenerate plan.pb.go from plan.proto. Needs protoc and protoc-gen-go
// (google.golang.org/protobuf/cmd/protoc-gen-go, v1.36.10) on PATH.
//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative plan.proto
