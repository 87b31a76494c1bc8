// The Boost.Asio headers the transport uses, included with GCC's
// -Wnull-dereference silenced: g++ 12 reports false positives inside Asio's
// scheduler (scheduler.ipp, compensating_work_started) once it is inlined.
// The pragma applies to the Asio code only, so include this header before
// anything else that includes Asio (transport.h does).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#endif
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
