// app.js: the console's shell: navigation and the hash router that picks
// a page. Each page is a module of pages/ exporting a component.
import {html, render, useState, useEffect} from './vendor/preact-htm.mjs';
import {ClusterPage} from './pages/cluster.js';
import {TopicsPage, TopicPage} from './pages/topics.js';
import {TimelinePage} from './pages/timeline.js';
import {MessagesPage} from './pages/messages.js';
import {GroupsPage, GroupPage} from './pages/groups.js';

// routes maps the first part of the hash (#/topics/orders -> "topics") to
// its page without arguments and, where it has one, its page of one item
// (#/topics/orders: the topic orders).
const routes = {
  '': [ClusterPage],
  'cluster': [ClusterPage],
  'topics': [TopicsPage, TopicPage],
  'timeline': [TimelinePage],
  'messages': [MessagesPage],
  'groups': [GroupsPage, GroupPage],
};

const nav = [
  ['cluster', 'Cluster'],
  ['topics', 'Topics'],
  ['timeline', 'Timeline'],
  ['messages', 'Messages'],
  ['groups', 'Groups'],
];

// parseHash splits "#/topics/orders?x=1" into the route's name, its
// decoded path arguments and its query.
export function parseHash(hash) {
  const [path, query] = hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return {name: parts[0] || '', args: parts.slice(1), query: new URLSearchParams(query || '')};
}

function useHash() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function App() {
  const route = parseHash(useHash());
  const pages = routes[route.name];
  const page = pages && (route.args.length && pages[1] ? pages[1] : pages[0]);
  const current = route.name || 'cluster';
  return html`
    <header class="top">
      <a class="brand" href="#/">tripod</a>
      <nav aria-label="Main">
        ${nav.map(([name, label]) => html`
          <a href="#/${name}" aria-current=${current === name ? 'page' : undefined}>${label}</a>`)}
      </nav>
    </header>
    <main id="main">
      ${page ? html`<${page} args=${route.args} query=${route.query} />`
             : html`<p class="error">No page ${route.name}.</p>`}
    </main>`;
}

render(html`<${App} />`, document.getElementById('app'));
