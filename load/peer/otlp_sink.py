"""A minimal OTLP/gRPC trace sink: accepts exports and counts spans (for benchmarks)."""
import sys, time, threading
from concurrent import futures
import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    spans = 0
    def Export(self, request, context):
        n = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        Sink.spans += n
        return trace_service_pb2.ExportTraceServiceResponse()

server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Sink(), server)
server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
server.start()
while True:
    time.sleep(5)
    print(f"spans received: {Sink.spans}", flush=True)
