// Iceberg's own REST catalog server (RESTCatalogServer's backend catalog and RESTServerCatalogAdapter,
// from iceberg-open-api's test fixtures; RESTCatalogServlet from iceberg-core's tests), wired as
// RESTCatalogServer.start does, with an OAuth2 client-credentials gate in front that Iceberg's server
// lacks (its /v1/oauth/tokens accepts any client, and no route asks for a token).
//
// The gate: POST /v1/oauth/tokens checks client_id and client_secret (grant_type client_credentials)
// against DBLOG_REST_CLIENT_ID / DBLOG_REST_CLIENT_SECRET and answers a random bearer token, or 401
// invalid_client; a token exchange (the client's refresh) needs an issued subject_token. Every other
// route needs `Authorization: Bearer <an issued token>`, else 401 as an Iceberg ErrorResponse.
// The catalog's settings come from CATALOG_* environment variables (RCKUtils' convention: CATALOG_URI,
// CATALOG_WAREHOUSE, CATALOG_IO__IMPL for io-impl, ...), the port from CATALOG_REST_PORT.
// Started by lab/rest_catalog.py, which compiles this file once into its cache.

import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServer;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class RestCatalogWithOAuth2 {
  static final String TOKEN_PATH = "/v1/oauth/tokens";

  static final class OAuth2Gate implements Filter {
    private final String clientId;
    private final String clientSecret;
    private final Set<String> issued = ConcurrentHashMap.newKeySet();
    private final SecureRandom random = new SecureRandom();

    OAuth2Gate(String clientId, String clientSecret) {
      this.clientId = clientId;
      this.clientSecret = clientSecret;
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
        throws IOException, ServletException {
      HttpServletRequest request = (HttpServletRequest) req;
      HttpServletResponse response = (HttpServletResponse) res;
      String path = request.getRequestURI();
      if (path.endsWith(TOKEN_PATH)) {
        token(request, response);
        return;
      }
      String authorization = request.getHeader("Authorization");
      String token =
          authorization != null && authorization.regionMatches(true, 0, "Bearer ", 0, 7)
              ? authorization.substring(7).trim()
              : null;
      if (token == null || !issued.contains(token)) {
        String message = token == null ? "no bearer token" : "unknown bearer token";
        send(response, 401,
            "{\"error\":{\"message\":\"Not authorized: " + message
                + "\",\"type\":\"NotAuthorizedException\",\"code\":401}}");
        return;
      }
      chain.doFilter(req, res);
    }

    private void token(HttpServletRequest request, HttpServletResponse response) throws IOException {
      Map<String, String> form = form(new String(request.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
      String grant = form.getOrDefault("grant_type", "");
      boolean granted;
      if (grant.equals("client_credentials")) {
        granted = same(clientId, form.get("client_id")) && same(clientSecret, form.get("client_secret"));
      } else if (grant.equals("urn:ietf:params:oauth:grant-type:token-exchange")) {
        granted = issued.contains(form.getOrDefault("subject_token", ""));
      } else {
        send(response, 400, "{\"error\":\"unsupported_grant_type\",\"error_description\":\"" + grant + "\"}");
        return;
      }
      if (!granted) {
        send(response, 401,
            "{\"error\":\"invalid_client\",\"error_description\":\"unknown client or wrong secret\"}");
        return;
      }
      byte[] bytes = new byte[24];
      random.nextBytes(bytes);
      String token = Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
      issued.add(token);
      send(response, 200,
          "{\"access_token\":\"" + token + "\",\"token_type\":\"bearer\","
              + "\"issued_token_type\":\"urn:ietf:params:oauth:token-type:access_token\",\"expires_in\":3600}");
    }

    private static boolean same(String expected, String given) {
      return given != null
          && MessageDigest.isEqual(expected.getBytes(StandardCharsets.UTF_8), given.getBytes(StandardCharsets.UTF_8));
    }

    private static Map<String, String> form(String body) {
      Map<String, String> values = new HashMap<>();
      for (String pair : body.split("&")) {
        int equals = pair.indexOf('=');
        if (equals > 0) {
          values.put(URLDecoder.decode(pair.substring(0, equals), StandardCharsets.UTF_8),
              URLDecoder.decode(pair.substring(equals + 1), StandardCharsets.UTF_8));
        }
      }
      return values;
    }

    private static void send(HttpServletResponse response, int status, String json) throws IOException {
      response.setStatus(status);
      response.setContentType("application/json");
      response.getOutputStream().write(json.getBytes(StandardCharsets.UTF_8));
    }
  }

  public static void main(String[] args) throws Exception {
    String clientId = System.getenv("DBLOG_REST_CLIENT_ID");
    String clientSecret = System.getenv("DBLOG_REST_CLIENT_SECRET");
    if (clientId == null || clientSecret == null) {
      throw new IllegalArgumentException("set DBLOG_REST_CLIENT_ID and DBLOG_REST_CLIENT_SECRET");
    }
    // RESTCatalogServer's own backend catalog (from the CATALOG_* environment) and its adapter;
    // both are package-private in Iceberg, so reached by reflection.
    Constructor<RESTCatalogServer> constructor = RESTCatalogServer.class.getDeclaredConstructor();
    constructor.setAccessible(true);
    RESTCatalogServer server = constructor.newInstance();
    Method initialize = RESTCatalogServer.class.getDeclaredMethod("initializeBackendCatalog");
    initialize.setAccessible(true);
    Object catalogContext = initialize.invoke(server);
    Class<?> adapterClass = Class.forName("org.apache.iceberg.rest.RESTServerCatalogAdapter");
    Constructor<?> adapterConstructor = adapterClass.getDeclaredConstructor(catalogContext.getClass());
    adapterConstructor.setAccessible(true);
    RESTCatalogAdapter adapter = (RESTCatalogAdapter) adapterConstructor.newInstance(catalogContext);

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    context.addFilter(new FilterHolder(new OAuth2Gate(clientId, clientSecret)), "/*",
        EnumSet.of(DispatcherType.REQUEST));
    context.insertHandler(new GzipHandler());
    String port = System.getenv().getOrDefault("CATALOG_REST_PORT", "8181");
    Server http = new Server(new java.net.InetSocketAddress("127.0.0.1", Integer.parseInt(port)));
    http.setHandler(context);
    http.start();
    System.out.println("REST catalog ready on port " + port);
    System.out.flush();
    http.join();
  }
}
