// A minimal grpc-go server for benchlib's load generator tests and bench/grpc_vs_peers.py.
//
// It serves seed 004's two unary methods (/SmallPayloadService/SendSmallPayload and
// /HugePayloadService/SendHugePayload, payloads.proto beside this file) without generated
// code: a codec that passes the serialized messages through as bytes, and a hand-written
// ServiceDesc. Each answer is a fixed, pre-serialized response message (the study's
// SmallResponse{Message="SmallResponse"} and HugeResponse of 150 x 25 'a' and 150 x 123).
// A request message that does not parse as the method's request type is answered with
// INVALID_ARGUMENT, so a client sending the wrong bytes is seen in its rows.
//
// Usage: grpcserver -addr 127.0.0.1:PORT   (prints "PORT N" once it accepts; -addr 127.0.0.1:0 picks a port)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawCodec passes messages through as bytes: the handlers see the serialized request.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T is not *[]byte", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: %T is not *[]byte", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.Codec = rawCodec{}

// wellFormed reports whether b parses as a protobuf message (any fields).
func wellFormed(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num <= 0 {
			return false
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return true
}

func smallResponse() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendString(b, "SmallResponse")
}

func hugeResponse() []byte {
	var b []byte
	s := "aaaaaaaaaaaaaaaaaaaaaaaaa" // 25 x 'a'
	for i := 0; i < 150; i++ {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	var packed []byte
	for i := 0; i < 150; i++ {
		packed = protowire.AppendVarint(packed, 123)
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, packed)
}

func handler(resp []byte) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in []byte
		if err := dec(&in); err != nil {
			return nil, err
		}
		if !wellFormed(in) {
			return nil, status.Error(codes.InvalidArgument, "the request is not a protobuf message")
		}
		out := resp
		return &out, nil
	}
}

func service(name, method string, resp []byte) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: method, Handler: handler(resp)}},
		Metadata:    "payloads.proto",
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "address to listen on (loopback)")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(service("SmallPayloadService", "SendSmallPayload", smallResponse()), struct{}{})
	srv.RegisterService(service("HugePayloadService", "SendHugePayload", hugeResponse()), struct{}{})
	fmt.Fprintf(os.Stdout, "PORT %d\n", lis.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
