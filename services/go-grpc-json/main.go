// Study 05's Go server (seed 004, peterdeme/Grpc.Json.PerformanceTest): the seed's two
// payloads as gRPC (grpc-go, code generated from payloads.proto) or as JSON over HTTP
// (net/http with encoding/json, HTTP/1.1 and HTTP/2 over cleartext on the same port).
//
// APP_VARIANT=grpc serves /SmallPayloadService/SendSmallPayload and
// /HugePayloadService/SendHugePayload; APP_VARIANT=json serves POST /small and POST /huge.
// Both parse the request into its message type and build the response per call (as the
// seed's gRPC server did): SmallResponse{Message: "SmallResponse"}, and a HugeResponse of
// 150 x 25 'a' and 150 x 123. A JSON body that does not parse is answered with 400.
// JSON responses use the seed's ASP.NET Core MVC casing (camelCase: {"message":...}),
// requests the seed client's (PascalCase, as Newtonsoft wrote them); matching is
// case-insensitive in encoding/json, as in MVC.
//
// Listens on $HOST:$PORT (default 127.0.0.1:8080).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"google.golang.org/grpc"
)

const hugeCount = 150

var hugeString = strings.Repeat("a", 25)

func hugeLists() ([]string, []int32) {
	s := make([]string, hugeCount)
	n := make([]int32, hugeCount)
	for i := range s {
		s[i] = hugeString
		n[i] = 123
	}
	return s, n
}

// -- gRPC ------------------------------------------------------------------------------------

type smallService struct{ UnimplementedSmallPayloadServiceServer }

func (smallService) SendSmallPayload(context.Context, *SmallRequest) (*SmallResponse, error) {
	return &SmallResponse{Message: "SmallResponse"}, nil
}

type hugeService struct{ UnimplementedHugePayloadServiceServer }

func (hugeService) SendHugePayload(context.Context, *HugeRequest) (*HugeResponse, error) {
	s, n := hugeLists()
	return &HugeResponse{StringList: s, IntList: n}, nil
}

func serveGRPC(lis net.Listener) error {
	srv := grpc.NewServer()
	RegisterSmallPayloadServiceServer(srv, smallService{})
	RegisterHugePayloadServiceServer(srv, hugeService{})
	return srv.Serve(lis)
}

// -- JSON over HTTP --------------------------------------------------------------------------

type smallRequestJSON struct {
	Message string `json:"Message"`
}
type smallResponseJSON struct {
	Message string `json:"message"`
}
type hugeRequestJSON struct {
	StringList []string `json:"StringList"`
	IntList    []int32  `json:"IntList"`
}
type hugeResponseJSON struct {
	StringList []string `json:"stringList"`
	IntList    []int32  `json:"intList"`
}

// jsonHandler parses the body into a fresh *Req and answers what respond builds, with
// Content-Type and Content-Length set.
func jsonHandler[Req any](respond func() any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req Req
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "request is not JSON of the expected shape: "+err.Error(), http.StatusBadRequest)
			return
		}
		out, err := json.Marshal(respond())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h["Content-Type"] = []string{"application/json; charset=utf-8"}
		h["Content-Length"] = []string{strconv.Itoa(len(out))}
		w.Write(out)
	}
}

func serveJSON(lis net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/small", jsonHandler[smallRequestJSON](func() any { return smallResponseJSON{Message: "SmallResponse"} }))
	mux.Handle("/huge", jsonHandler[hugeRequestJSON](func() any {
		s, n := hugeLists()
		return hugeResponseJSON{StringList: s, IntList: n}
	}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge (Go >= 1.24)
	srv := &http.Server{Handler: mux, Protocols: protocols}
	return srv.Serve(lis)
}

func main() {
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	variant := os.Getenv("APP_VARIANT")
	serve := map[string]func(net.Listener) error{"grpc": serveGRPC, "json": serveJSON}[variant]
	if serve == nil {
		log.Fatalf("APP_VARIANT=%q: valid: grpc, json", variant)
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "%s server listening on %s\n", variant, lis.Addr())
	log.Fatal(serve(lis))
}
