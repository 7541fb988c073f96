// Study 05's canned server: the seed's responses from memory, for measuring what benchlib's
// own client costs per call on each path (gRPC over HTTP/2, JSON over HTTP/1.1 and h2c).
//
// It does no work a service does: no router, no parsing into messages, no building of
// responses. Every request body is looked up, byte for byte, in a table of the seed's four
// requests (payloads/, the same files as go-grpc-json's) and answered with the response
// bytes go-grpc-json sends for it:
//
//   - HTTP/1.1 (keep-alive): Go net/http's head (Content-Length, Content-Type, Date, in
//     that order) and the JSON body;
//   - HTTP/2 with prior knowledge, gRPC (content carried in a 5-byte gRPC frame):
//     HEADERS (:status 200, content-type application/grpc), DATA (the framed protobuf
//     message), trailers (grpc-status 0, grpc-message empty), as grpc-go sends them;
//   - HTTP/2, JSON (h2c): HEADERS (:status 200, content-type, content-length, date), DATA
//     (over 4 KiB: DATA, then an empty DATA ending the stream), as net/http's HTTP/2 server
//     sends them.
//
// Header blocks are encoded per connection with golang.org/x/net/http2/hpack's encoder, the
// one grpc-go and net/http use, with the same fields in the same order: the first response
// on a connection indexes them, later ones are a few bytes of indexes, byte for byte what
// the real servers send (a client's work depends on it: decoding a literal block costs more
// than recognizing a repeated one).
//
// A body that is none of the seed's requests is answered with 400 (HTTP/1.1 and h2c) or
// grpc-status 3 (gRPC). HTTP/1.1 and HTTP/2 share the port (the preface tells them apart).
//
// Listens on $HOST:$PORT (default 127.0.0.1:8080).
package main

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

//go:embed payloads
var payloads embed.FS

const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

type answer struct {
	grpc bool   // a gRPC call (the body is a framed protobuf message)
	body []byte // the response body (gRPC: framed)
}

// table: request body -> the answer, for the seed's four requests.
var table = map[string]answer{}

func mustRead(name string) []byte {
	b, err := payloads.ReadFile("payloads/" + name)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// framed: a gRPC length-prefixed message (not compressed).
func framed(msg []byte) []byte {
	out := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	copy(out[5:], msg)
	return out
}

func init() {
	for _, p := range []string{"small", "huge"} {
		table[string(mustRead(p+"-request.json"))] = answer{false, mustRead(p + "-response.json")}
		table[string(framed(mustRead(p+"-request.bin")))] = answer{true, framed(mustRead(p + "-response.bin"))}
	}
}

// date: the Date header's value (Go net/http's format), refreshed once a second.
var date atomic.Value

func keepDate() {
	for {
		date.Store([]byte(time.Now().UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")))
		time.Sleep(time.Second - time.Duration(time.Now().Nanosecond()))
	}
}

func main() {
	date.Store([]byte(time.Now().UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")))
	go keepDate()
	host := os.Getenv("HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "canned server listening on %s\n", lis.Addr())
	for {
		c, err := lis.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c)
	}
}

func serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	start, err := r.Peek(len(preface))
	if err == nil && string(start) == preface {
		r.Discard(len(preface))
		serveH2(r, w)
		return
	}
	serveH1(r, w)
}

// -- HTTP/1.1 ----------------------------------------------------------------------------------

func serveH1(r *bufio.Reader, w *bufio.Writer) {
	var body []byte
	for {
		length := 0
		for { // the head: only Content-Length matters
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if len(line) > 15 && bytes.EqualFold(line[:15], []byte("content-length:")) {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			}
		}
		if cap(body) < length {
			body = make([]byte, length)
		}
		body = body[:length]
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		a, ok := table[string(body)]
		if !ok || a.grpc {
			w.WriteString("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
		} else {
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: ")
			w.WriteString(strconv.Itoa(len(a.body)))
			w.WriteString("\r\nContent-Type: application/json; charset=utf-8\r\nDate: ")
			w.Write(date.Load().([]byte))
			w.WriteString("\r\n\r\n")
			w.Write(a.body)
		}
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// -- HTTP/2 ------------------------------------------------------------------------------------

const (
	frameData     = 0x0
	frameHeaders  = 0x1
	frameSettings = 0x4
	framePing     = 0x6
	frameGoaway   = 0x7
	frameWindow   = 0x8
	flagEndStream = 0x1
	flagAck       = 0x1
	flagEndHeads  = 0x4
	flagPadded    = 0x8
	flagPriority  = 0x20
)

func writeFrame(w *bufio.Writer, typ, flags byte, sid uint32, payload []byte) {
	n := len(payload)
	w.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags,
		byte(sid >> 24), byte(sid >> 16), byte(sid >> 8), byte(sid)})
	w.Write(payload)
}

// encoder: one connection's HPACK encoder and its output.
type encoder struct {
	buf bytes.Buffer
	enc *hpack.Encoder
}

func newEncoder() *encoder {
	e := &encoder{}
	e.enc = hpack.NewEncoder(&e.buf)
	return e
}

// block: the header block of “fields“ (name, value, name, value...).
func (e *encoder) block(fields ...string) []byte {
	e.buf.Reset()
	for i := 0; i < len(fields); i += 2 {
		e.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return e.buf.Bytes()
}

func serveH2(r *bufio.Reader, w *bufio.Writer) {
	writeFrame(w, frameSettings, 0, 0, nil)
	if w.Flush() != nil {
		return
	}
	var head [9]byte
	payload := make([]byte, 16384)
	bodies := map[uint32][]byte{}
	grpcCall := map[uint32]bool{}
	enc := newEncoder()
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
		typ, flags := head[3], head[4]
		sid := binary.BigEndian.Uint32(head[5:]) & 0x7fffffff
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		p := payload[:n]
		if _, err := io.ReadFull(r, p); err != nil {
			return
		}
		switch typ {
		case frameHeaders:
			// only to refuse an unknown gRPC call with a gRPC status: the block is not
			// decoded (a Huffman-coded content-type reads as not gRPC, so gets a 400)
			grpcCall[sid] = bytes.Contains(p, []byte("application/grpc"))
			if flags&flagEndStream != 0 {
				respond(w, enc, sid, nil, grpcCall[sid])
				delete(grpcCall, sid)
			}
		case frameData:
			data := p
			if flags&flagPadded != 0 && len(data) > 0 {
				pad := int(data[0])
				data = data[1 : len(data)-pad]
			}
			bodies[sid] = append(bodies[sid], data...)
			if n > 0 { // give the connection's window back at once
				var inc [4]byte
				binary.BigEndian.PutUint32(inc[:], uint32(n))
				writeFrame(w, frameWindow, 0, 0, inc[:])
			}
			if flags&flagEndStream != 0 {
				respond(w, enc, sid, bodies[sid], grpcCall[sid])
				delete(bodies, sid)
				delete(grpcCall, sid)
			}
		case frameSettings:
			if flags&flagAck == 0 {
				writeFrame(w, frameSettings, flagAck, 0, nil)
			}
		case framePing:
			if flags&flagAck == 0 {
				writeFrame(w, framePing, flagAck, 0, p)
			}
		case frameGoaway:
			w.Flush()
			return
		}
		if r.Buffered() < 9 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// h2HandlerBuffer: net/http's HTTP/2 handler buffer (4 KiB); a larger body is written through
// it at once and the stream ended by an empty DATA frame when the handler returns.
const h2HandlerBuffer = 4 << 10

func respond(w *bufio.Writer, e *encoder, sid uint32, body []byte, grpcHint bool) {
	a, ok := table[string(body)]
	switch {
	case ok && a.grpc:
		writeFrame(w, frameHeaders, flagEndHeads, sid, e.block(":status", "200", "content-type", "application/grpc"))
		writeFrame(w, frameData, 0, sid, a.body)
		writeFrame(w, frameHeaders, flagEndHeads|flagEndStream, sid, e.block("grpc-status", "0", "grpc-message", ""))
	case ok:
		writeFrame(w, frameHeaders, flagEndHeads, sid, e.block(":status", "200",
			"content-type", "application/json; charset=utf-8", "content-length", strconv.Itoa(len(a.body)),
			"date", string(date.Load().([]byte))))
		if len(a.body) > h2HandlerBuffer { // as net/http: the body, then an empty DATA ending the stream
			writeFrame(w, frameData, 0, sid, a.body)
			writeFrame(w, frameData, flagEndStream, sid, nil)
		} else {
			writeFrame(w, frameData, flagEndStream, sid, a.body)
		}
	case grpcHint:
		writeFrame(w, frameHeaders, flagEndHeads, sid, e.block(":status", "200", "content-type", "application/grpc"))
		writeFrame(w, frameHeaders, flagEndHeads|flagEndStream, sid,
			e.block("grpc-status", "3", "grpc-message", "not a seed request"))
	default:
		writeFrame(w, frameHeaders, flagEndHeads|flagEndStream, sid, e.block(":status", "400", "content-length", "0"))
	}
}
