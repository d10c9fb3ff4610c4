//! The request transport: framed TCP connections with many requests in flight, and the server pipeline (decode, authorize, schedule, execute, reply, account).
