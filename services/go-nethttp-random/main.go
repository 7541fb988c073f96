// go-nethttp-random: study 02's Go net/http row (standard library only), the shared
// contract of the study's fair rows:
//
//	GET /api/values/{id}   a fresh 1,024-character string per request, drawn from the seed's
//	                       63-character alphabet with math/rand/v2's per-thread ChaCha8
//	                       generator (no shared lock)
//	GET /api/values/fixed  1,024 characters generated once at start
//
// Both answer 200 with Content-Type text/plain; charset=utf-8 and Content-Length 1024 (and
// Date), on HTTP/1.1 keep-alive. The handler is the same as go-iris-random's "fair" variant,
// so the two rows differ by the framework only. Listens on $HOST (default 127.0.0.1) and
// $PORT (default 5000).
package main

import (
	"log"
	randv2 "math/rand/v2"
	"net/http"
	"os"
	"strconv"
)

const letterBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "

const size = 1024

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = letterBytes[randv2.IntN(len(letterBytes))]
	}
	return b
}

func write(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func main() {
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "5000"
	}
	fixed := randomBytes(size)
	mux := http.NewServeMux()
	// the more specific pattern wins, whatever the order of registration
	mux.HandleFunc("GET /api/values/fixed", func(w http.ResponseWriter, r *http.Request) { write(w, fixed) })
	mux.HandleFunc("GET /api/values/{id}", func(w http.ResponseWriter, r *http.Request) { write(w, randomBytes(size)) })
	addr := host + ":" + port
	log.Printf("go-nethttp-random listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
