#include "daemon/server/status_page.h"

#include <civetweb.h>

#include "status_page_html.h"  // generated from status_page.html

namespace prism::server {
namespace {

int PageHandler(mg_connection* conn, void*) {
  const std::string_view page = StatusPageHtml();
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n"
            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
            page.size());
  mg_write(conn, page.data(), page.size());
  return 200;
}

}  // namespace

std::string_view StatusPageHtml() { return kStatusPageHtml; }

void RegisterStatusPage(mg_context* ctx) { mg_set_request_handler(ctx, "/$", PageHandler, nullptr); }

}  // namespace prism::server
